// Command dcm-store runs the store server that DCM's replicas on many
// machines share (platform/store/storeserver): PostgreSQL as a cluster of
// its own on loopback and FerretDB over TLS in front of it, with a user
// per service holding only its collections. It prints the URI files (each
// 0600; give one to each service as DCM_MONGO_URI_FILE) and serves until
// interrupted. `make store-server` runs it on .dcm/store-server. -host
// puts FerretDB on another address of this machine (the bridge of the
// local clusters, for their pods: docs/deploy.md).
//
// With a command after the flags it starts the server, runs the command
// with DCM_TEST_MONGO_URI set to the administrator's URI (the environment,
// never a flag) and DCM_TEST_STORE_SERVER=1, stops the server and exits
// with the command's status: `make test-store-server` runs the store,
// lease and replica suites so.
//
//	dcm-store -dir .dcm/store-server
//	dcm-store -dir /tmp/x -- go test ./platform/store/...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dcm-project/dcm/platform/store/storeserver"
)

func main() {
	dir := flag.String("dir", filepath.Join(".dcm", "store-server"), "the server's directory: PostgreSQL's data, TLS files, passwords, URI files")
	db := flag.String("database", "dcm", "the MongoDB database the services use")
	host := flag.String("host", "127.0.0.1", "the IP address of this machine FerretDB listens on (its certificate names it), e.g. a local cluster's bridge address for its pods; PostgreSQL stays on loopback")
	pgBin := flag.String("pg-bin", "", "directory of PostgreSQL's programs (default: Debian's newest /usr/lib/postgresql/*/bin)")
	pgUser := flag.String("pg-user", "postgres", "the system user PostgreSQL runs as when this runs as root")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	code, err := run(storeserver.Config{Dir: *dir, Database: *db, Host: *host, Users: storeserver.Users, PGBin: *pgBin, PGUser: *pgUser, Log: log}, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "dcm-store:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(cfg storeserver.Config, command []string) (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := storeserver.New(cfg)
	if err != nil {
		return 0, err
	}
	if err := s.Start(ctx); err != nil {
		return 0, err
	}
	defer s.Stop()
	if len(command) > 0 {
		return runWith(ctx, s, command)
	}
	fmt.Printf("store server: FerretDB (TLS) on %s, PostgreSQL on 127.0.0.1 (data in %s)\n", s.Addr(), cfg.Dir)
	fmt.Printf("CA certificate: %s\n", s.CAFile())
	fmt.Println("URI files (0600; DCM_MONGO_URI_FILE=<file>):")
	for _, r := range append([]string{storeserver.AdminRole, storeserver.AllInOneRole}, roleNames(cfg.Users)...) {
		fmt.Printf("  %-16s %s\n", r, s.URIFile(r))
	}
	fmt.Println("serving; Ctrl-C stops")
	<-ctx.Done()
	return 0, nil
}

// runWith runs command against s as its administrator.
func runWith(ctx context.Context, s *storeserver.Server, command []string) (int, error) {
	uri, err := s.URI(storeserver.AdminRole)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Env = append(os.Environ(), "DCM_TEST_MONGO_URI="+uri, "DCM_TEST_STORE_SERVER=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

func roleNames(users []storeserver.User) []string {
	out := make([]string, 0, len(users))
	for _, u := range users {
		out = append(out, storeserver.Role(u.Service))
	}
	return out
}
