// Command confdoc writes the configuration table of docs/configuration.md
// from server.Config's struct tags (env, flag, default, usage, secret), so
// the documented settings are the ones the programs read. It replaces only
// the lines between the BEGIN and END markers; the prose around them is
// edited by hand. `make generate` runs it; `make check-generated` fails
// when the committed table is stale.
//
//	go run ./platform/server/cmd/confdoc docs/configuration.md
package main

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/dcm-project/dcm/platform/docgen"
	"github.com/dcm-project/dcm/platform/server"
)

const (
	begin = "<!-- BEGIN GENERATED: make generate writes this table from platform/server/config.go; do not edit -->"
	end   = "<!-- END GENERATED -->"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: confdoc <markdown file>")
		os.Exit(2)
	}
	if err := rewrite(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "confdoc:", err)
		os.Exit(1)
	}
}

// rewrite replaces the generated table in the file at path.
func rewrite(path string) error {
	return docgen.Replace(path, begin, end, Table(reflect.TypeFor[server.Config]()))
}

// Table renders one Markdown row per field of t that has an env tag.
func Table(t reflect.Type) string {
	var b strings.Builder
	b.WriteString("| variable | flag | default | meaning |\n|---|---|---|---|\n")
	for f := range t.Fields() {
		env := f.Tag.Get("env")
		if env == "" {
			continue
		}
		def := "(empty)"
		if d, ok := f.Tag.Lookup("default"); ok && d != "" {
			def = "`" + d + "`"
		}
		// Markdown would read <dir> as an HTML tag and | as a cell border.
		usage := strings.NewReplacer("|", `\|`, "<", `\<`).Replace(f.Tag.Get("usage"))
		if f.Tag.Get("secret") == "true" {
			usage += ". Secret: redacted from the logged config"
		}
		if only, ok := f.Tag.Lookup("programs"); ok {
			usage += ". Read by the " + strings.ReplaceAll(only, ",", " and ") + " programs only; to any other it is unknown (the variable ignored, the flag refused)"
		}
		flag := "(none)"
		if fl := f.Tag.Get("flag"); fl != "" {
			flag = "`-" + fl + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", env, flag, def, usage)
	}
	return b.String()
}
