package istiotest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Build builds istiod (pilot-discovery) from the tools module test/istio
// into root/bin/istio and returns the binary's path. It skips the build when
// the binary is newer than test/istio's go.mod and go.sum, which pin every
// source it is built from: a warm `make test` does not even relink it (a
// relink from a warm build cache costs 18-65 s on 2 cores; docs/benchmarks.md).
// A new Go toolchain is not noticed: remove bin/istio to rebuild with it.
func Build(ctx context.Context, root string) (string, error) {
	return buildTool(ctx, root, "pilot-discovery", "istio.io/istio/pilot/cmd/pilot-discovery", "")
}

// BuildValidate builds istio-validate (test/istio/cmd/istio-validate: the
// pinned Istio's config validation over a stream of objects) into
// root/bin/istio like Build, and returns its path. Besides go.mod and
// go.sum, its own source is an input: editing it rebuilds it.
func BuildValidate(ctx context.Context, root string) (string, error) {
	return buildTool(ctx, root, "istio-validate", "./cmd/istio-validate", filepath.Join("cmd", "istio-validate", "main.go"))
}

// buildTool builds package pkg of test/istio into root/bin/istio/name
// unless the binary is newer than go.mod, go.sum and src (a file of
// test/istio, empty: none).
func buildTool(ctx context.Context, root, name, pkg, src string) (string, error) {
	dir := filepath.Join(root, "test", "istio")
	bin := filepath.Join(root, "bin", "istio", name)
	inputs := []string{filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")}
	if src != "" {
		inputs = append(inputs, filepath.Join(dir, src))
	}
	if upToDate(bin, inputs...) {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	// Test binaries of several packages may get here at once (go test
	// ./... without make istio-bins first): one builds, the others wait
	// and find it done.
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(bin), ".build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if upToDate(bin, inputs...) {
		return bin, nil
	}
	// Write to a temporary name first so that an interrupted build never
	// leaves a binary newer than go.sum that is not whole.
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, pkg)
	cmd.Dir = dir
	// Outside the product's go.work (Istio's k8s.io and grpc differ); no
	// cgo: istiod's only cgo users are net and os/user.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("build %s (%s) in test/istio: %w\n%s", name, pkg, err, strings.TrimSpace(out.String()))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// upToDate says whether target exists and is newer than every input.
func upToDate(target string, inputs ...string) bool {
	t, err := os.Stat(target)
	if err != nil {
		return false
	}
	for _, in := range inputs {
		i, err := os.Stat(in)
		if err != nil || !t.ModTime().After(i.ModTime()) {
			return false
		}
	}
	return true
}
