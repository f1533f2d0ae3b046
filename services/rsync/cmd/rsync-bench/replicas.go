package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/secrets"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// topology is how many replicas share the store, and whether one child
// replica is killed mid-rollout.
type topology struct {
	replicas int
	kill     bool
	args     []string // the simulated clusters' flags, for the children
}

// children are the child replicas (this program again, -child).
type children struct {
	cmds  []*exec.Cmd
	names []string
}

// start runs replicas-1 children on the store at uri.
func (t topology) start(uri, keyLine string) (*children, error) {
	c := &children{names: []string{"bench-0"}}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	for i := 1; i < t.replicas; i++ {
		name := fmt.Sprintf("bench-%d", i)
		cmd := exec.Command(self, append([]string{"-child", name}, t.args...)...)
		cmd.Env = append(os.Environ(), "DCM_BENCH_URI="+uri, "DCM_BENCH_KEY="+keyLine)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, err
		}
		c.cmds, c.names = append(c.cmds, cmd), append(c.names, name)
	}
	return c, nil
}

// stop ends the children that are still running.
func (c *children) stop() {
	for _, cmd := range c.cmds {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
}

// waitSplit waits until every replica holds shards of clusters.
func (c *children) waitSplit(ctx context.Context, st *store.Store) error {
	leases := store.NewLeases(st, engine.LeaseCollection)
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := leases.List(ctx)
		if err != nil {
			return err
		}
		holding := map[string]int{}
		held := 0
		for _, l := range list {
			if strings.HasPrefix(l.Name, "shard/") && l.Expires.After(time.Now()) {
				name, _, _ := strings.Cut(l.Holder, "#")
				holding[name]++
				held++
			}
		}
		ok := held == 64
		share := (64 + len(c.names) - 1) / len(c.names)
		for _, n := range c.names {
			ok = ok && holding[n] > 0 && holding[n] <= share
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shards not split among the replicas: %v", holding)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killAtHalf kills the first child with SIGKILL once half the rollout's
// objects are applied.
func (c *children) killAtHalf(ctx context.Context, e *engine.Engine, owner string, start time.Time) error {
	if len(c.cmds) == 0 {
		return fmt.Errorf("-kill needs -replicas > 1")
	}
	for {
		st, err := e.Status(ctx, owner)
		if err != nil {
			return err
		}
		if st.GetTotal() > 0 && st.GetReady()*2 >= st.GetTotal() {
			if err := c.cmds[0].Process.Kill(); err != nil {
				return err
			}
			_ = c.cmds[0].Wait()
			fmt.Printf("  killed %s at %d of %d objects applied, %s after submit\n", c.names[1], st.GetReady(), st.GetTotal(), time.Since(start).Round(time.Millisecond))
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runChild runs one replica on the parent's store until SIGTERM, over its
// own simulated clusters (the same names and behaviour as the parent's).
func runChild(name string, clusters int, latency time.Duration, failures float64) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	kr, err := secrets.ParseKeyring(os.Getenv("DCM_BENCH_KEY"))
	if err != nil {
		return err
	}
	st, err := store.Open(store.Config{URI: os.Getenv("DCM_BENCH_URI"), Database: "bench", Keyring: kr}, zap.NewNop())
	if err != nil {
		return err
	}
	defer st.Close(context.Background())
	sims := engine.SimulatedClusters{}
	for i := range clusters {
		sims[fmt.Sprintf("sim/c%04d", i)] = &engine.Simulated{Latency: latency, FailureRate: failures}
	}
	return engine.New(st, sims, engine.Config{Replica: name}, zap.NewNop()).Run(ctx)
}
