package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The embedded store's keyed lookups. FerretDB's SQLite backend (v1.24)
// runs a query whose filter is exactly {_id: <string>} as
// `WHERE _ferretdb_sjson->'$._id' = ?`, but indexes _id under another
// spelling of that expression (`_ferretdb_sjson->"_id"`), which SQLite
// does not match to the query: every keyed find and delete reads the
// whole table, parsing each row's JSON (about 0.4 s among 10,000 rollout
// states, docs/benchmarks.md). indexIDs adds, to every table of the
// embedded databases, an index on the very expression the queries use,
// so that they are key lookups as on MongoDB. The index is SQLite's own:
// FerretDB's metadata does not list it, a dropped collection drops it with
// its table, and nothing else in FerretDB depends on it.

// idIndexEvery is how often tables made since are indexed (FerretDB makes
// a collection's table at its first insert).
const idIndexEvery = time.Second

// indexLoop indexes the tables now and every idIndexEvery until ctx ends.
func (e *Embedded) indexLoop(ctx context.Context) {
	t := time.NewTicker(idIndexEvery)
	defer t.Stop()
	for {
		if err := e.indexIDs(ctx); err != nil && ctx.Err() == nil {
			e.log.Debug("index the embedded store's tables by _id; will retry", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// indexIDs gives every table of every database in the store's directory
// its _id index, if it has none (yet, or any more: an index made while
// another connection read the file was seen to vanish, so every pass
// checks them all again).
func (e *Embedded) indexIDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(e.dir, "*.sqlite"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := indexFile(ctx, f); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

func indexFile(ctx context.Context, path string) error {
	// The driver FerretDB registers; the same busy timeout as FerretDB's
	// own connections, so that neither side fails while the other writes.
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	rows, err := db.QueryContext(ctx, `SELECT t.table_name FROM _ferretdb_collections t
		WHERE NOT EXISTS (SELECT 1 FROM sqlite_master m WHERE m.type = 'index' AND m.name = t.table_name || '_dcm_id')`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil // a database FerretDB has not set up yet
		}
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			_ = rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (_ferretdb_sjson->'$._id')`, t+"_dcm_id", t)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
