// Command calltable writes the table of who may call what over gRPC into
// docs/security.md, from the dcm.access.v1 options of every service's
// contract (proto/dcm/access/v1/access.proto), read from the generated
// descriptors as the gRPC server reads them (platform/server.CallersOf).
// It replaces only the lines between the BEGIN and END markers; `make
// generate` runs it and `make check-generated` fails when the committed
// table is stale.
//
//	go run ./platform/server/cmd/calltable docs/security.md
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// Every contract with a service: their descriptors register here.
	_ "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/core/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/keys/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/docgen"
	"github.com/dcm-project/dcm/platform/server"
)

const (
	begin = "<!-- BEGIN GENERATED: make generate writes this table from the dcm.access.v1 options in proto/; do not edit -->"
	end   = "<!-- END GENERATED -->"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: calltable <markdown file>")
		os.Exit(2)
	}
	if err := rewrite(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "calltable:", err)
		os.Exit(1)
	}
}

// rewrite replaces the generated table in the file at path.
func rewrite(path string) error {
	table, err := Table()
	if err != nil {
		return err
	}
	return docgen.Replace(path, begin, end, table)
}

// Services are the full names of every registered DCM service (package
// dcm.*), sorted.
func Services() []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(f.Package()), "dcm.") {
			return true
		}
		for i := range f.Services().Len() {
			out = append(out, f.Services().Get(i))
		}
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.ServiceDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	return out
}

// Table renders a row per method: who may call it. A method without
// callers is an error: the server would refuse it to everyone.
func Table() (string, error) {
	var b strings.Builder
	b.WriteString("| gRPC method | DCM programs (certificate CN) | admin |\n|---|---|---|\n")
	for _, sd := range Services() {
		for i := range sd.Methods().Len() {
			m := sd.Methods().Get(i)
			full := "/" + string(sd.FullName()) + "/" + string(m.Name())
			c, ok := server.CallersOf(full)
			if !ok {
				return "", fmt.Errorf("%s declares no callers (dcm.access.v1.callers or its service's default_callers)", full)
			}
			programs := "none"
			if len(c.GetServices()) > 0 {
				programs = strings.Join(c.GetServices(), ", ")
			}
			admin := "no"
			if c.GetAdmin() {
				admin = "yes"
			}
			fmt.Fprintf(&b, "| `%s.%s` | %s | %s |\n", strings.TrimPrefix(string(sd.FullName()), "dcm."), m.Name(), programs, admin)
		}
	}
	return b.String(), nil
}
