package storeserver

import (
	"fmt"
	"strings"
)

// User is a database user of the store server: a service and the
// collections it may use.
type User struct {
	Service     string
	Collections []string
}

// Role is the database user (a PostgreSQL role, which FerretDB logs in as)
// of service: the same name as the MongoDB user docs/store.md makes.
func Role(service string) string { return "dcm-" + service }

// AdminRole is the store server's administrator (PostgreSQL's bootstrap
// superuser): it makes the users, the collections and the grants, and the
// tests use it (each test makes a database of its own).
const AdminRole = "dcm-admin"

// AllInOneRole is the user of a program that runs every service (the
// all-in-one dcm): a member of every service's role, so it has exactly
// their grants together.
const AllInOneRole = "dcm-allinone"

// metadataTable is FerretDB's table, in each database's schema, that maps
// collections to the tables holding them (FerretDB v1.24 postgresql
// backend, metadata.metadataTableName).
const metadataTable = "_ferretdb_database_metadata"

// GrantsSQL is the PostgreSQL script that gives each user's role the
// rights to its own collections in database db and nothing else: USAGE on
// the schema FerretDB keeps db in, SELECT on FerretDB's metadata table (to
// find its tables), and SELECT, INSERT, UPDATE, DELETE on the table of
// each collection it declares. No role may create a table (a collection),
// so the collections are made first, by the administrator; a service that
// opens another one is refused by PostgreSQL. It runs as a superuser
// (dcm-store does; docs/store.md shows it).
func GrantsSQL(db string, users []User) string {
	var b strings.Builder
	fmt.Fprintf(&b, `-- As the PostgreSQL superuser, once FerretDB has made database %[1]s's collections.
CREATE OR REPLACE FUNCTION pg_temp.dcm_grant(r text, c text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t text;
BEGIN
  SELECT _jsonb->>'table' INTO STRICT t FROM %[2]s WHERE _jsonb->>'_id' = c;
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %%I.%%I TO %%I', %[3]s, t, r);
END $$;
`, db, quoteIdent(db)+"."+quoteIdent(metadataTable), quoteLiteral(db))
	for _, u := range users {
		r := quoteIdent(Role(u.Service))
		fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", quoteIdent(db), r)
		fmt.Fprintf(&b, "GRANT SELECT ON %s.%s TO %s;\n", quoteIdent(db), quoteIdent(metadataTable), r)
		for _, c := range u.Collections {
			fmt.Fprintf(&b, "SELECT pg_temp.dcm_grant(%s, %s);\n", quoteLiteral(Role(u.Service)), quoteLiteral(c))
		}
		fmt.Fprintf(&b, "GRANT %s TO %s;\n", r, quoteIdent(AllInOneRole))
	}
	return b.String()
}

// guardSQL makes every FerretDB table of the cluster refuse an update
// that does not raise a versioned document's version: FerretDB 1.x runs
// an update as a read, then an UPDATE by _id, so two writers that read the
// same version would both write. PostgreSQL runs a row trigger under the
// row's lock on its latest version, so the second writer's trigger sees
// the first one's version and refuses (store.IsWriteConflict: Aborted).
// An event trigger adds the row trigger to each table FerretDB makes.
// Every DCM write of a versioned document raises its version (Records,
// Leases), except a stamp's (store.Stamps.Set, last writer wins), which
// the guard leaves alone. The message must start with the text
// store.IsWriteConflict looks for.
const guardSQL = `
CREATE OR REPLACE FUNCTION public.dcm_version_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- A stamp ({_id, version}: store.Stamps) is last-writer-wins by design.
  IF jsonb_typeof(OLD._jsonb->'version') = 'number'
     AND EXISTS (SELECT 1 FROM jsonb_object_keys(OLD._jsonb) k WHERE k NOT IN ('$s', '_id', 'version'))
     AND (jsonb_typeof(NEW._jsonb->'version') IS DISTINCT FROM 'number'
          OR (NEW._jsonb->>'version')::numeric <= (OLD._jsonb->>'version')::numeric) THEN
    RAISE EXCEPTION 'dcm: write conflict: version % was written meanwhile', OLD._jsonb->>'version';
  END IF;
  RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION public.dcm_guard_table(t regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = '_jsonb' AND NOT attisdropped)
     AND NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = t AND tgname = 'dcm_version_guard') THEN
    EXECUTE format('CREATE TRIGGER dcm_version_guard BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION public.dcm_version_guard()', t);
  END IF;
END $$;
CREATE OR REPLACE FUNCTION public.dcm_guard_new_tables() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE obj record;
BEGIN
  FOR obj IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE' AND object_type = 'table' LOOP
    PERFORM public.dcm_guard_table(obj.objid::regclass);
  END LOOP;
END $$;
DROP EVENT TRIGGER IF EXISTS dcm_guard_new_tables;
CREATE EVENT TRIGGER dcm_guard_new_tables ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION public.dcm_guard_new_tables();
SELECT public.dcm_guard_table(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema');
`

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
