package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// TestEmbeddedKeyedLookupsUseAnIndex checks the premise of the embedded
// store's _id index: SQLite plans the query FerretDB runs for a filter
// {_id: <string>} as a search of that index, not a scan, once the store
// has indexed a new collection's table.
func TestEmbeddedKeyedLookupsUseAnIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := store.Open(store.Config{Database: "idx", DataDir: dir, Keyring: storetest.Keyring(t)}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close(context.Background()) })
	ctx := context.Background()
	recs := store.NewRecords(s, "things", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	for i := range 50 {
		require.NoError(t, recs.Create(ctx, fmt.Sprintf("t-%d", i), "p", &structpb.Struct{}))
	}

	path := filepath.Join(dir, "store", "idx.sqlite")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		require.NoError(t, err)
		return db
	}
	db := open()
	var table string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT table_name FROM _ferretdb_collections WHERE name = 'things'`).Scan(&table))
	require.NoError(t, db.Close())
	plan := func() string {
		db := open()
		defer func() { _ = db.Close() }()
		rows, err := db.QueryContext(ctx, fmt.Sprintf(`EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM %q WHERE _ferretdb_sjson->'$._id' = ?`, table), `"t-7"`)
		require.NoError(t, err)
		defer func() { _ = rows.Close() }()
		var out []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			out = append(out, detail)
		}
		return strings.Join(out, "; ")
	}
	require.Eventually(t, func() bool { return strings.Contains(plan(), "USING INDEX "+table+"_dcm_id") },
		10*time.Second, 50*time.Millisecond, "plan: %s; indexes: %s", plan(), indexes(t, path))
	got, err := recs.Get(ctx, "t-7")
	require.NoError(t, err)
	require.NotNil(t, got.Msg)
}

func indexes(t *testing.T, path string) string {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	rows, err := db.Query(`SELECT name || ' ' || coalesce(sql, '') FROM sqlite_master WHERE type = 'index'`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
