// Command emcodoc writes docs/emco.md's list of EMCO's resources that DCM
// does not serve, from the table the gateway answers them with
// (gateway.Elsewhere), between the BEGIN and END markers. `make generate`
// runs it.
//
//	go run ./services/gateway/cmd/emcodoc docs/emco.md
package main

import (
	"fmt"
	"os"

	"github.com/dcm-project/dcm/platform/docgen"
	"github.com/dcm-project/dcm/services/gateway/internal/gateway"
)

// The markers around the generated list.
const (
	Begin = "<!-- BEGIN GENERATED: make generate writes this table from gateway.Elsewhere (services/gateway/cmd/emcodoc); do not edit -->"
	End   = "<!-- END GENERATED -->"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: emcodoc <markdown file>")
		os.Exit(2)
	}
	if err := docgen.Replace(os.Args[1], Begin, End, gateway.ElsewhereDoc()); err != nil {
		fmt.Fprintln(os.Stderr, "emcodoc:", err)
		os.Exit(1)
	}
}
