package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// k8sModule is the pinned k8s.io/kubernetes module of test/k8s.
type k8sModule struct {
	version string
	dir     string // in the module cache
}

var kubernetesVersion = regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes (v\d+\.\d+\.\d+)\s*$`)

func kubernetes(ctx context.Context, root string) (k8sModule, error) {
	dir := filepath.Join(root, "test", "k8s")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return k8sModule{}, err
	}
	m := kubernetesVersion.FindSubmatch(mod)
	if m == nil {
		return k8sModule{}, errors.New("test/k8s/go.mod does not require k8s.io/kubernetes")
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	b, err := cmd.Output()
	if err != nil {
		return k8sModule{}, fmt.Errorf("go mod download k8s.io/kubernetes in test/k8s: %w", err)
	}
	var d struct{ Dir, Version string }
	if err := json.Unmarshal(b, &d); err != nil {
		return k8sModule{}, err
	}
	if d.Version != string(m[1]) || d.Dir == "" {
		return k8sModule{}, fmt.Errorf("go mod download gave k8s.io/kubernetes %s at %q, test/k8s pins %s", d.Version, d.Dir, m[1])
	}
	return k8sModule{version: d.Version, dir: d.Dir}, nil
}

var pauseTag = regexp.MustCompile(`(?m)^TAG \?= (\S+)$`)

// buildPause compiles the module's pause.c as build/pause/Makefile does
// (gcc -Os -Wall -Werror -static -DVERSION=v<TAG>-<rev>, stripped) and
// describes the image as build/pause/Dockerfile does: /pause, user
// 65535:65535, nothing else.
func buildPause(ctx context.Context, k k8sModule, binDir string) (spec, error) {
	mk, err := os.ReadFile(filepath.Join(k.dir, "build", "pause", "Makefile"))
	if err != nil {
		return spec{}, err
	}
	m := pauseTag.FindSubmatch(mk)
	if m == nil {
		return spec{}, errors.New("build/pause/Makefile: no TAG")
	}
	src := filepath.Join(k.dir, "build", "pause", "linux", "pause.c")
	bin := filepath.Join(binDir, "pause")
	if err := run(ctx, binDir, nil, "gcc", "-Os", "-Wall", "-Werror", "-static",
		"-DVERSION=v"+string(m[1])+"-"+k.version, "-o", bin, src); err != nil {
		return spec{}, err
	}
	if err := run(ctx, binDir, nil, "strip", bin); err != nil {
		return spec{}, err
	}
	return spec{
		Name: "pause", Refs: []string{PauseRepo + ":" + PauseTag}, Binary: bin,
		Path: "/pause", Entrypoint: []string{"/pause"}, User: "65535:65535",
		Labels: map[string]string{
			"org.opencontainers.image.title":   "pause",
			"org.opencontainers.image.version": string(m[1]),
			"org.opencontainers.image.source":  "k8s.io/kubernetes@" + k.version + " build/pause/linux/pause.c",
		},
		Created: time.Unix(0, 0).UTC(),
	}, nil
}

// buildAgnhost builds agnhost in test/k8s (a package of the pinned module;
// it has no go.mod of its own), static as test/images/image-util.sh does.
// The image holds the binary, the base layer and upstream's entrypoint and
// default command, not upstream's Alpine tools and shell: it runs as 65532,
// and subcommands that exec a shell (netexec's /shell) do not work in it.
func buildAgnhost(ctx context.Context, root string, k k8sModule, binDir string) (spec, error) {
	v, err := os.ReadFile(filepath.Join(k.dir, "test", "images", "agnhost", "VERSION"))
	if err != nil {
		return spec{}, err
	}
	version := strings.TrimSpace(string(v))
	bin := filepath.Join(binDir, "agnhost")
	if err := goBuild(ctx, filepath.Join(root, "test", "k8s"), []string{"GOWORK=off"},
		"-trimpath", "-ldflags=-w", "-o", bin, "k8s.io/kubernetes/test/images/agnhost"); err != nil {
		return spec{}, err
	}
	return spec{
		Name: "agnhost", Refs: []string{AgnhostRepo + ":" + version}, Binary: bin,
		Path: "/agnhost", Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"},
		User: fmt.Sprintf("%d:%d", UID, UID), Base: true,
		Labels: map[string]string{
			"org.opencontainers.image.title":   "agnhost",
			"org.opencontainers.image.version": version,
			"org.opencontainers.image.source":  "k8s.io/kubernetes@" + k.version + " test/images/agnhost",
		},
		Created: time.Unix(0, 0).UTC(),
	}, nil
}
