package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/config"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/allinone"
)

// TestStoreUsersDeclareWhatTheyOpen builds every part of the all-in-one
// program (allinone.Build, as the program does, without running it) on a
// store and compares the collections each service's view opened
// (store.Store.Opened) with the ones it declares (allinone.StoreUsers),
// both ways: an undeclared collection would be refused to the service by
// a database set up from docs/store.md; a declared one it never opens
// would be granted for nothing. Collections a service opens only later,
// in a background loop or a request, are not seen here: open them in the
// service's constructor, as every service does now.
func TestStoreUsersDeclareWhatTheyOpen(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	var cfg server.Config
	require.NoError(t, config.Load(&cfg, allinone.Name, nil))
	// No certificates here: the peers are dialed lazily and never called.
	cfg.InsecureGRPC = true
	cfg.GRPCAddr = "127.0.0.1:1"
	env := &app.Env{Config: cfg, Log: zap.NewNop(), Store: st}
	ctx := context.Background()
	_, opts, err := allinone.Build(ctx, env)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, stop := range opts.OnStop {
			stop(ctx)
		}
	})

	opened := st.Opened()
	declared := map[string][]string{}
	for _, u := range allinone.StoreUsers {
		declared[u.Name] = slices.Sorted(slices.Values(u.Collections))
	}
	for svc, colls := range opened {
		if svc == "" {
			t.Errorf("collections opened on the program's store, not on a service's view (Env.StoreFor): %v", colls)
			continue
		}
		for _, c := range colls {
			if !slices.Contains(declared[svc], c) {
				t.Errorf("service %s opens collection %q, which its Collections (services/%s/%s.go) do not list: add it there and run make generate", svc, c, svc, svc)
			}
		}
	}
	for svc, colls := range declared {
		for _, c := range colls {
			if !slices.Contains(opened[svc], c) {
				t.Errorf("service %s declares collection %q but opens no such collection: remove it from its Collections and run make generate", svc, c)
			}
		}
	}
}

// TestRolesRefuseAmbiguousLists: a collection two services declare, or a
// service that declares none, is an error, not a role.
func TestRolesRefuseAmbiguousLists(t *testing.T) {
	t.Parallel()
	_, err := Roles([]allinone.StoreUser{{Name: "a", Collections: []string{"x"}}, {Name: "b", Collections: []string{"x"}}})
	require.ErrorContains(t, err, "collection x is declared by a and by b")
	_, err = Roles([]allinone.StoreUser{{Name: "a"}})
	require.ErrorContains(t, err, "service a declares no collections")
}

// TestDocIsGenerated: docs/store.md holds the roles as generated now (make
// check-generated says the same in CI; this says it in go test).
func TestDocIsGenerated(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "store.md"))
	require.NoError(t, err)
	roles, err := Roles(allinone.StoreUsers)
	require.NoError(t, err)
	require.True(t, strings.Contains(string(b), begin+"\n"+roles+end), "docs/store.md's roles are stale: run make generate")
}
