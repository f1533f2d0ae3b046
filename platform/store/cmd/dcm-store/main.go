// Command dcm-store runs the store server that DCM's replicas on many
// machines share (platform/store/storeserver): PostgreSQL as a cluster of
// its own on loopback and FerretDB over TLS in front of it, with a user
// per service holding only its collections. It prints the URI files (each
// 0600; give one to each service as DCM_MONGO_URI_FILE) and serves until
// interrupted. `make store-server` runs it on .dcm/store-server.
//
//	dcm-store -dir .dcm/store-server
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dcm-project/dcm/platform/store/storeserver"
)

func main() {
	dir := flag.String("dir", filepath.Join(".dcm", "store-server"), "the server's directory: PostgreSQL's data, TLS files, passwords, URI files")
	db := flag.String("database", "dcm", "the MongoDB database the services use")
	pgBin := flag.String("pg-bin", "", "directory of PostgreSQL's programs (default: Debian's newest /usr/lib/postgresql/*/bin)")
	pgUser := flag.String("pg-user", "postgres", "the system user PostgreSQL runs as when this runs as root")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if err := run(storeserver.Config{Dir: *dir, Database: *db, Users: storeserver.Users, PGBin: *pgBin, PGUser: *pgUser, Log: log}); err != nil {
		fmt.Fprintln(os.Stderr, "dcm-store:", err)
		os.Exit(1)
	}
}

func run(cfg storeserver.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := storeserver.New(cfg)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer s.Stop()
	fmt.Printf("store server: FerretDB (TLS) on %s, PostgreSQL on 127.0.0.1 (data in %s)\n", s.Addr(), cfg.Dir)
	fmt.Printf("CA certificate: %s\n", s.CAFile())
	fmt.Println("URI files (0600; DCM_MONGO_URI_FILE=<file>):")
	for _, r := range append([]string{storeserver.AdminRole, storeserver.AllInOneRole}, roleNames(cfg.Users)...) {
		fmt.Printf("  %-16s %s\n", r, s.URIFile(r))
	}
	fmt.Println("serving; Ctrl-C stops")
	<-ctx.Done()
	return nil
}

func roleNames(users []storeserver.User) []string {
	out := make([]string, 0, len(users))
	for _, u := range users {
		out = append(out, storeserver.Role(u.Service))
	}
	return out
}
