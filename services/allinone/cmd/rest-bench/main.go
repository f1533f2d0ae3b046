// Command rest-bench measures the REST data API (`make bench-rest`): the
// all-in-one program on loopback with its embedded store (-store embedded)
// or on a store server of its own (-store server: FerretDB on PostgreSQL
// over TLS, platform/store/storeserver, the all-in-one's user), reached as a user
// reaches it (HTTPS, a bearer token the token service issued), creating,
// reading, listing and deleting logical clouds with one user and one quota
// each, at 1 and 8 clients. Beside each operation it measures a ceiling in
// the same run: the same GET through the same gateway and gRPC path,
// answered by a handler that touches no store (ceiling.go). It reports
// requests per second, p50 and p99 latency, and the store commands each
// request cost (the commands the driver sent, store.CommandsSent), and
// writes the table into docs/benchmarks.md ("REST data API"), a section
// per store.
//
// It is a program rather than a `go test -bench`: it reports several
// operations, client counts and a ceiling as one table from one run, and
// writes it into the docs, which testing.B's one-number-per-benchmark
// output does not fit.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/store/storeserver"
	"github.com/dcm-project/dcm/services/allinone"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rest-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	clouds := flag.Int("clouds", 1000, "logical clouds to create (a fifth by 1 client, the rest by 8); the list reads them all")
	duration := flag.Duration("duration", 5*time.Second, "how long each read measurement runs")
	out := flag.String("out", "docs/benchmarks.md", "write the table into this file's \"REST data API\" section (empty: print only)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measurements to this file")
	profileOnly := flag.String("profile-only", "", "profile only the first measurement of this operation and clients, e.g. get/8 (create, ceiling, get, list, delete; empty: all)")
	kind := flag.String("store", storeEmbedded, "the store: embedded (FerretDB on SQLite in the program) or server (a store server of the benchmark's own: PostgreSQL, and FerretDB over TLS)")
	flag.Parse()
	if *kind != storeEmbedded && *kind != storeServer {
		return fmt.Errorf("-store: %q is neither %s nor %s", *kind, storeEmbedded, storeServer)
	}
	if os.Getenv("DCM_MONGO_URI") != "" || os.Getenv("DCM_MONGO_URI_FILE") != "" {
		return fmt.Errorf("the benchmark chooses its store (-store): unset DCM_MONGO_URI and DCM_MONGO_URI_FILE")
	}

	// Not os.MkdirTemp's 0700 directory alone: PostgreSQL's user must
	// traverse the path when the benchmark runs as root.
	dir, err := os.MkdirTemp("", "rest-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if *kind == storeServer {
		srv, err := storeserver.New(storeserver.Config{Dir: filepath.Join(dir, "store-server"), Users: storeserver.Users})
		if err != nil {
			return err
		}
		if err := srv.Start(ctx); err != nil {
			return err
		}
		defer srv.Stop()
		if err := os.Setenv("DCM_MONGO_URI_FILE", srv.URIFile(storeserver.AllInOneRole)); err != nil {
			return err
		}
	}
	p, err := app.Start(ctx, allinone.Name, []string{
		"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-data-dir", dir, "-log-level", "warn",
	}, true, build, app.LogTo(noAudit{os.Stderr}))
	if err != nil {
		return fmt.Errorf("start the all-in-one program: %w", err)
	}
	defer func() {
		cancel()
		_ = p.Wait()
	}()
	if (p.Env.Store.Embedded() != nil) != (*kind == storeEmbedded) {
		return fmt.Errorf("the program is not on the %s store", *kind)
	}
	c, err := newClient(ctx, p)
	if err != nil {
		return err
	}
	background := c.idle(3 * time.Second)

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		c.profile.file, c.profile.only = f, *profileOnly
		defer pprof.StopCPUProfile()
	}
	one := *clouds / 5
	names := make([]string, *clouds)
	for i := range names {
		names[i] = fmt.Sprintf("lc-%05d", i)
	}
	var rows []row
	add := func(r row, err error) error {
		if err == nil {
			fmt.Fprintln(os.Stderr, r.String())
			rows = append(rows, r)
		}
		return err
	}
	if err := add(c.each("create", 1, names[:one], c.create)); err != nil {
		return err
	}
	if err := add(c.each("create", 8, names[one:], c.create)); err != nil {
		return err
	}
	loaded := c.idle(3 * time.Second)
	for _, n := range []int{1, 8} {
		if err := add(c.during("ceiling (GET, no store)", n, *duration, c.get(ceilingName))); err != nil {
			return err
		}
		if err := add(c.during("get", n, *duration, c.get(names[0]))); err != nil {
			return err
		}
		if err := add(c.during(fmt.Sprintf("list of %d", *clouds), n, *duration, c.list(*clouds))); err != nil {
			return err
		}
	}
	if err := add(c.each("delete", 1, names[:one], c.delete)); err != nil {
		return err
	}
	if err := add(c.each("delete", 8, names[one:], c.delete)); err != nil {
		return err
	}
	pprof.StopCPUProfile()
	text := table(*kind, rows, background, loaded, *clouds)
	fmt.Println(text)
	if *out == "" {
		return nil
	}
	return writeSection(*out, *kind, text)
}

// noAudit passes the program's log lines on but for the audit log's,
// which are written whatever the level: one per create and delete.
type noAudit struct{ w *os.File }

func (n noAudit) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"logger":"dcm.audit"`)) {
		return len(p), nil
	}
	return n.w.Write(p)
}
