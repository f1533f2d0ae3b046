// Command storedoc writes the database roles of docs/store.md, the table
// of each service's collections and the mongosh script that makes a role
// and a user per service, from the collections every service declares
// (allinone.StoreUsers; each service's Collections), so an operator who
// follows the doc grants each service exactly the collections it opens.
// It replaces only the lines between the BEGIN and END markers; `make
// generate` runs it and `make check-generated` fails when the committed
// roles are stale. Its test fails when a service opens a collection its
// list leaves out.
//
//	go run ./services/allinone/cmd/storedoc docs/store.md
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/dcm-project/dcm/platform/docgen"
	"github.com/dcm-project/dcm/services/allinone"
)

const (
	begin = "<!-- BEGIN GENERATED: make generate writes these roles from each service's Collections (services/allinone/cmd/storedoc); do not edit -->"
	end   = "<!-- END GENERATED -->"
)

// actions are what every service does on its collections: read, insert,
// update (conditionally, or upsert), remove; a collection is made by its
// first insert.
var actions = []string{"find", "insert", "update", "remove", "createCollection"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: storedoc <markdown file>")
		os.Exit(2)
	}
	if err := rewrite(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "storedoc:", err)
		os.Exit(1)
	}
}

// rewrite replaces the generated roles in the file at path.
func rewrite(path string) error {
	roles, err := Roles(allinone.StoreUsers)
	if err != nil {
		return err
	}
	return docgen.Replace(path, begin, end, roles)
}

// Roles renders the table (a row per service) and the mongosh script (a
// role and a user per service). A service without collections, or a
// collection two services declare, is an error: a collection belongs to
// one service (its view seals the collection's secrets).
func Roles(users []allinone.StoreUser) (string, error) {
	owner := map[string]string{}
	for _, u := range users {
		if len(u.Collections) == 0 {
			return "", fmt.Errorf("service %s declares no collections", u.Name)
		}
		for _, c := range u.Collections {
			if o, ok := owner[c]; ok {
				return "", fmt.Errorf("collection %s is declared by %s and by %s", c, o, u.Name)
			}
			owner[c] = u.Name
		}
	}
	var b strings.Builder
	b.WriteString("| service | collections |\n|---|---|\n")
	for _, u := range users {
		fmt.Fprintf(&b, "| %s | `%s` |\n", u.Name, strings.Join(u.Collections, "`, `"))
	}
	b.WriteString("\n```js\nuse dcm\nconst collections = {\n")
	for _, u := range users {
		fmt.Fprintf(&b, "  %s: [\"%s\"],\n", u.Name, strings.Join(u.Collections, `", "`))
	}
	fmt.Fprintf(&b, `}
for (const [svc, colls] of Object.entries(collections)) {
  db.createRole({
    role: "dcm-" + svc,
    privileges: colls.map(c => ({ resource: { db: "dcm", collection: c },
      actions: ["%s"] })),
    roles: [],
  })
  db.createUser({ user: "dcm-" + svc, pwd: passwordPrompt(), roles: [{ role: "dcm-" + svc, db: "dcm" }] })
  // x509 instead: db.getSiblingDB("$external").createUser({ user: "CN=dcm-" + svc + ",O=...", roles: [{ role: "dcm-" + svc, db: "dcm" }] })
}
`+"```\n", strings.Join(actions, `", "`))
	return b.String(), nil
}
