package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Names of the images that are not DCM's own. The pause tag is the one
// the kubelet of v1.33 asks the runtime for by default
// (cmd/kubelet/app/options/container_runtime.go, defaultPodSandboxImage);
// agnhost's is its test/images/agnhost/VERSION.
const (
	PauseRepo   = "registry.k8s.io/pause"
	PauseTag    = "3.10"
	AgnhostRepo = "registry.k8s.io/e2e-test-images/agnhost"
	// DCMRegistry is the registry part of DCM's own images: a name no
	// registry answers to, so a node can only have them imported.
	DCMRegistry = "dcm.local"
	// CABundle is where the images (and Go's crypto/x509) find the CA
	// certificates; the builder copies the machine's own.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// UID is the non-root user and group DCM's images and agnhost run as
	// (deploy/base's runAsUser/runAsGroup).
	UID = 65532
)

// schema changes every key when the way an image is made changes.
const schema = "dcm-images/3"

// spec is one image: its refs, files and configuration.
type spec struct {
	Name       string            // the tarball's name under out/
	Refs       []string          // full names, e.g. dcm.local/core:abc123
	Binary     string            // path of the binary on this machine
	Path       string            // where the binary goes in the image
	Entrypoint []string          //
	Cmd        []string          //
	User       string            // numeric uid:gid
	Base       bool              // the shared base layer (CA, passwd, group, /tmp)
	Labels     map[string]string // OCI labels of the config
	Created    time.Time         // every timestamp of the image, for reproducible digests
}

// Programs are DCM's programs that get an image: every service's
// services/<name>/cmd/<name> (the gateway among them) and the all-in-one
// services/allinone/cmd/dcm, by name and import path. The benchmarks and
// the developer tools under cmd/ dirs are not deployed, so get none.
func Programs(root string) (map[string]string, error) {
	mains, err := filepath.Glob(filepath.Join(root, "services", "*", "cmd", "*", "main.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{"dcm": "github.com/dcm-project/dcm/services/allinone/cmd/dcm"}
	for _, m := range mains {
		cmd := filepath.Dir(m)
		name, svc := filepath.Base(cmd), filepath.Base(filepath.Dir(filepath.Dir(cmd)))
		if name == svc {
			out[name] = "github.com/dcm-project/dcm/services/" + svc + "/cmd/" + name
		}
	}
	if _, ok := out["gateway"]; !ok {
		return nil, fmt.Errorf("no services/gateway/cmd/gateway under %s", root)
	}
	return out, nil
}

// BuildAll builds every image into out (root/bin/images when empty),
// rewriting a tarball only when its inputs (the binary, the CA bundle, the
// names, labels and configuration) changed. The binaries are built first
// (go build keeps an up-to-date one; gcc compiles pause in a moment).
func BuildAll(ctx context.Context, root, out string, log io.Writer) error {
	if out == "" {
		out = filepath.Join(root, "bin", "images")
	}
	binDir := filepath.Join(out, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	git, err := gitInfo(ctx, root)
	if err != nil {
		return err
	}
	programs, err := Programs(root)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(programs))
	pkgs := make([]string, 0, len(programs))
	for n, p := range programs {
		names = append(names, n)
		pkgs = append(pkgs, p)
	}
	sort.Strings(names)
	sort.Strings(pkgs)

	start := time.Now()
	// Static, without the builder's paths: what runs in a pod. In the
	// workspace, whatever GOWORK this program was run with.
	if err := goBuild(ctx, root, []string{"GOWORK=" + filepath.Join(root, "go.work")}, append([]string{"-trimpath", "-o", binDir + "/"}, pkgs...)...); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(log, "built %d programs in %s\n", len(pkgs), time.Since(start).Round(time.Millisecond))

	var specs []spec
	for _, n := range names {
		specs = append(specs, spec{
			Name:       n,
			Refs:       []string{DCMRegistry + "/" + n + ":" + git.version, DCMRegistry + "/" + n + ":latest"},
			Binary:     filepath.Join(binDir, n),
			Path:       "/usr/local/bin/" + n,
			Entrypoint: []string{"/usr/local/bin/" + n},
			User:       fmt.Sprintf("%d:%d", UID, UID),
			Base:       true,
			Labels: map[string]string{
				"org.opencontainers.image.title":    n,
				"org.opencontainers.image.version":  git.version,
				"org.opencontainers.image.revision": git.revision,
				"org.opencontainers.image.created":  git.created.Format(time.RFC3339),
				"org.opencontainers.image.source":   "github.com/dcm-project/dcm",
			},
			Created: git.created,
		})
	}

	k8s, err := kubernetes(ctx, root)
	if err != nil {
		return err
	}
	start = time.Now()
	pause, err := buildPause(ctx, k8s, binDir)
	if err != nil {
		return err
	}
	specs = append(specs, pause)
	agnhost, err := buildAgnhost(ctx, root, k8s, binDir)
	if err != nil {
		return err
	}
	specs = append(specs, agnhost)
	_, _ = fmt.Fprintf(log, "built pause and agnhost (k8s.io/kubernetes %s) in %s\n", k8s.version, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	istio, err := buildIstio(ctx, root, binDir)
	if err != nil {
		return err
	}
	specs = append(specs, istio...)
	if err := os.MkdirAll(filepath.Join(out, IstioDir), 0o755); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(log, "built pilot-discovery and pilot-agent (test/istio) in %s\n", time.Since(start).Round(time.Millisecond))

	for _, s := range specs {
		start := time.Now()
		file := filepath.Join(out, s.Name+".tar")
		wrote, err := writeIfChanged(s, file)
		if err != nil {
			return fmt.Errorf("image %s: %w", s.Name, err)
		}
		st, err := os.Stat(file)
		if err != nil {
			return err
		}
		what := "up to date"
		if wrote {
			what = "written in " + time.Since(start).Round(time.Millisecond).String()
		}
		_, _ = fmt.Fprintf(log, "%-50s %s (%.1f MB) %s\n", s.Refs[0], file, float64(st.Size())/1e6, what)
	}
	return nil
}

// One writes an image of a static binary to the tarball file, configured as
// DCM's images are (the base layer, user 65532, the binary as entrypoint).
func One(binary, ref, file string) error {
	name := filepath.Base(binary)
	created := time.Unix(0, 0).UTC()
	s := spec{
		Name: name, Refs: []string{ref}, Binary: binary,
		Path: "/usr/local/bin/" + name, Entrypoint: []string{"/usr/local/bin/" + name},
		User: fmt.Sprintf("%d:%d", UID, UID), Base: true,
		Labels:  map[string]string{"org.opencontainers.image.title": name},
		Created: created,
	}
	_, err := writeIfChanged(s, file)
	return err
}

// writeIfChanged writes the image of s to file unless file.key holds the
// key of the same inputs and file is there.
func writeIfChanged(s spec, file string) (bool, error) {
	key, err := inputsKey(s)
	if err != nil {
		return false, err
	}
	keyFile := file + ".key"
	if old, err := os.ReadFile(keyFile); err == nil && string(old) == key {
		if _, err := os.Stat(file); err == nil {
			return false, nil
		}
	}
	img, err := image(s)
	if err != nil {
		return false, err
	}
	if err := writeLayout(img, s.Refs, s.Created, file); err != nil {
		return false, err
	}
	return true, os.WriteFile(keyFile, []byte(key), 0o644)
}

// inputsKey is the hash of everything an image is made of.
func inputsKey(s spec) (string, error) {
	h := sha256.New()
	meta, err := json.Marshal(struct {
		Schema string
		Spec   spec
		Arch   string
	}{schema, s, runtime.GOARCH})
	if err != nil {
		return "", err
	}
	h.Write(meta)
	files := []string{s.Binary}
	if s.Base {
		files = append(files, CABundle)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		_, _ = fmt.Fprintf(h, "\n%s %x", f, sum) // a hash.Hash never fails a write
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// git describes the commit the images are built from.
type git struct {
	version  string // git describe --tags --always --dirty
	revision string // the full commit
	created  time.Time
}

func gitInfo(ctx context.Context, root string) (git, error) {
	out := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var g git
	var err error
	if g.version, err = out("describe", "--tags", "--always", "--dirty"); err != nil {
		return g, err
	}
	if g.revision, err = out("rev-parse", "HEAD"); err != nil {
		return g, err
	}
	ct, err := out("log", "-1", "--format=%ct")
	if err != nil {
		return g, err
	}
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return g, fmt.Errorf("commit time %q: %w", ct, err)
	}
	g.created = time.Unix(sec, 0).UTC()
	return g, nil
}

// goBuild runs go build for linux without cgo, so the binary is static.
func goBuild(ctx context.Context, dir string, env []string, args ...string) error {
	env = append(env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	return run(ctx, dir, env, "go", append([]string{"build"}, args...)...)
}

func run(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
