package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
const schema = "dcm-images/2"

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

// RepoRoot is the directory holding go.work, found upwards from the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
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

// image assembles s: the base layer (shared by every image that has it, so
// a node stores it once) and the binary's layer.
func image(s spec) (v1.Image, error) {
	var layers []v1.Layer
	if s.Base {
		b, err := baseLayer()
		if err != nil {
			return nil, err
		}
		layers = append(layers, b)
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	l, err := layer(s.Created, []entry{{Path: s.Path, Mode: 0o755, Data: bin}})
	if err != nil {
		return nil, err
	}
	layers = append(layers, l)

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "dcm-images"}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: s.Created}
	cf.Config.User = s.User
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.Cmd = s.Cmd
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CABundle}
	cf.Config.Labels = s.Labels
	return mutate.ConfigFile(img, cf)
}

// entry is a file of a layer; a Dir entry has no data.
type entry struct {
	Path string
	Mode int64
	Dir  bool
	Data []byte
}

// baseLayer holds what a static program needs from a distribution: the CA
// bundle, the user and group 65532 (and root, for tools that look up uid
// 0), hosts resolution through DNS, and a /tmp. No shell, no package. Its
// times are the epoch's whatever the commit, so that every image has the
// same blob and a node stores it once.
func baseLayer() (v1.Layer, error) {
	ca, err := os.ReadFile(CABundle)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle (Debian: apt-get install ca-certificates): %w", err)
	}
	u := strconv.Itoa(UID)
	return layer(time.Unix(0, 0).UTC(), []entry{
		{Path: "/etc", Mode: 0o755, Dir: true},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:" + u + ":\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + u + ":" + u + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/ssl", Mode: 0o755, Dir: true},
		{Path: "/etc/ssl/certs", Mode: 0o755, Dir: true},
		{Path: CABundle, Mode: 0o644, Data: ca},
		{Path: "/home", Mode: 0o755, Dir: true},
		{Path: "/home/nonroot", Mode: 0o700, Dir: true},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/usr", Mode: 0o755, Dir: true},
		{Path: "/usr/local", Mode: 0o755, Dir: true},
		{Path: "/usr/local/bin", Mode: 0o755, Dir: true},
	})
}

// layer is a gzip-compressed OCI layer of the entries, root-owned except
// /home/nonroot, with every time set to created.
func layer(created time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: strings.TrimPrefix(e.Path, "/"), Mode: e.Mode, ModTime: created, Format: tar.FormatPAX}
		if e.Path == "/home/nonroot" {
			h.Uid, h.Gid = UID, UID
		}
		if e.Dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// writeLayout writes img as an OCI image-layout tarball, as `ctr images
// export` does: the index names the manifest once per ref, with the full
// name in io.containerd.image.name (what `ctr images import` names the
// image by) and the tag in org.opencontainers.image.ref.name.
func writeLayout(img v1.Image, refs []string, created time.Time, file string) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	type desc struct {
		MediaType   types.MediaType   `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	index := struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     types.MediaType `json:"mediaType"`
		Manifests     []desc          `json:"manifests"`
	}{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, r := range refs {
		tag := r[strings.LastIndex(r, ":")+1:]
		index.Manifests = append(index.Manifests, desc{MediaType: types.OCIManifestSchema1, Digest: digest.String(), Size: int64(len(manifest)),
			Annotations: map[string]string{"io.containerd.image.name": r, "org.opencontainers.image.ref.name": tag}})
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}

	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	// Gone after the rename; removed on an error.
	defer func() { _ = os.Remove(tmp.Name()) }()
	tw := tar.NewWriter(tmp)
	add := func(name string, mode int64, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: size, ModTime: created, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/sha256/", Mode: 0o755, ModTime: created, Typeflag: tar.TypeDir}); err != nil {
		return err
	}
	small := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
		{blob(digest), manifest},
		{blob(cfgName), config},
	}
	for _, f := range small {
		if err := add(f.name, 0o644, int64(len(f.data)), bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		err = add(blob(d), 0o644, size, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
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
