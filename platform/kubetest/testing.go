package kubetest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

var shared struct {
	once sync.Once
	h    *Harness
	dirs []string
	err  error
}

// ForTests returns n clusters shared by the test binary's tests, started
// by the first call (building the binaries if they are not up to date);
// it skips the test under -short. Call StopShared from TestMain after
// m.Run. Tests share the clusters: they must use names of their own.
func ForTests(tb testing.TB, n int) *Harness {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs real clusters (kube-apiserver, etcd); skipped with -short")
	}
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		root, err := RepoRoot()
		if err != nil {
			shared.err = err
			return
		}
		bin, err := Build(ctx, root)
		if err != nil {
			shared.err = err
			return
		}
		dir, err := os.MkdirTemp("", "dcm-clusters-")
		if err != nil {
			shared.err = err
			return
		}
		// etcd fsyncs every write: on tmpfs that costs nothing.
		etcdDir, err := os.MkdirTemp("/dev/shm", "dcm-etcd-")
		if err != nil {
			etcdDir = ""
		}
		shared.dirs = []string{dir, etcdDir}
		shared.h, shared.err = Start(ctx, Options{Dir: dir, EtcdDir: etcdDir, N: n, BinDir: bin})
	})
	if shared.err != nil {
		tb.Fatalf("start test clusters: %v", shared.err)
	}
	if len(shared.h.Clusters) < n {
		tb.Fatalf("the shared test clusters are %d, not %d", len(shared.h.Clusters), n)
	}
	return shared.h
}

// StopShared stops the clusters ForTests started, if any, and removes
// their files.
func StopShared() {
	if shared.h != nil {
		shared.h.Stop()
	}
	for _, d := range shared.dirs {
		if d != "" {
			_ = os.RemoveAll(d)
		}
	}
}
