package deploytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The images of docs/images.md that are not DCM's programs.
const (
	pauseRef   = "registry.k8s.io/pause:3.10"
	agnhostRef = "registry.k8s.io/e2e-test-images/agnhost:"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
)

// imageWant is what an image must be.
type imageWant struct {
	Ref        string // a name the index gives it (io.containerd.image.name); a prefix when it ends in ':'
	Entrypoint string
	UID        int
	CA         bool // the CA bundle, /etc/passwd and /etc/group with UID
}

// TestImageBuilder makes one image of a small static program with the
// builder of `make images` (test/images, run as its own module) and checks
// it as TestBuiltImages checks every image; it is written again only when
// an input changed; images of a dynamic binary and of a shell fail the checks. It builds no DCM program, so it stays cheap:
// compiling the builder and a hello-world.
func TestImageBuilder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image builder (-short)")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"), 0o644))
	hello := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-o", hello, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	builder := filepath.Join(dir, "dcm-images")
	build = exec.Command("go", "build", "-o", builder, "./cmd/dcm-images")
	build.Dir = filepath.Join(repo, "test", "images")
	build.Env = append(os.Environ(), "GOWORK=off")
	out, err = build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	image := func(binary, ref string) string {
		file := filepath.Join(dir, filepath.Base(binary)+".tar")
		out, err := exec.Command(builder, "-binary", binary, "-ref", ref, "-out", file).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return file
	}

	file := image(hello, "dcm.local/hello:test")
	require.Empty(t, inspectImage(t, file, imageWant{Ref: "dcm.local/hello:test", Entrypoint: "/usr/local/bin/hello", UID: 65532, CA: true}))

	// Written again only when an input changed (a rewrite renames a new
	// file into place).
	before, err := os.Stat(file)
	require.NoError(t, err)
	image(hello, "dcm.local/hello:test")
	same, err := os.Stat(file)
	require.NoError(t, err)
	require.True(t, os.SameFile(before, same), "rewritten with the same inputs")
	image(hello, "dcm.local/hello:other")
	renamed, err := os.Stat(file)
	require.NoError(t, err)
	require.False(t, os.SameFile(same, renamed), "not rewritten for a new name")
	require.Empty(t, inspectImage(t, file, imageWant{Ref: "dcm.local/hello:other", Entrypoint: "/usr/local/bin/hello", UID: 65532, CA: true}))

	// The checks are not vacuous: a dynamic binary and a shell are caught.
	dynamic, err := exec.LookPath("true")
	require.NoError(t, err)
	problems := inspectImage(t, image(dynamic, "dcm.local/true:test"), imageWant{Ref: "dcm.local/true:test", Entrypoint: "/usr/local/bin/true", UID: 65532, CA: true})
	require.Contains(t, strings.Join(problems, "\n"), "not static")
	sh := filepath.Join(t.TempDir(), "sh")
	data, err := os.ReadFile(hello)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(sh, data, 0o755))
	problems = inspectImage(t, image(sh, "dcm.local/sh:test"), imageWant{Ref: "dcm.local/sh:test", Entrypoint: "/usr/local/bin/sh", UID: 65532, CA: true})
	require.Contains(t, strings.Join(problems, "\n"), "a shell")
}

// TestBuiltImages checks the images `make images` left in bin/images, if
// it ran: one for each program (services/<name>/cmd/<name> and the
// all-in-one dcm), pause and agnhost, each as docs/images.md describes it.
func TestBuiltImages(t *testing.T) {
	dir := filepath.Join(repo, "bin", "images")
	tars, _ := filepath.Glob(filepath.Join(dir, "*.tar"))
	if len(tars) == 0 {
		t.Skip("no bin/images/*.tar: make images has not run")
	}
	want := map[string]imageWant{
		"pause":   {Ref: pauseRef, Entrypoint: "/pause", UID: 65535},
		"agnhost": {Ref: agnhostRef, Entrypoint: "/agnhost", UID: 65532, CA: true},
		// The test clusters' kube-dns (test/coredns, platform/kubetest/dns.go).
		"coredns": {Ref: "dcm.local/coredns:latest", Entrypoint: "/usr/local/bin/coredns", UID: 65532, CA: true},
		// The mesh tests' proxyless gRPC workload (test/grpcecho).
		"grpcecho": {Ref: "dcm.local/grpcecho:latest", Entrypoint: "/usr/local/bin/grpcecho", UID: 65532, CA: true},
		// Istio's, from test/istio, as the rendered charts name them; kept
		// apart from what every test node loads (docs/images.md).
		"istio/pilot":   {Ref: "docker.io/istio/pilot:1.31.0", Entrypoint: "/usr/local/bin/pilot-discovery", UID: 1337, CA: true},
		"istio/proxyv2": {Ref: "docker.io/istio/proxyv2:1.31.0", Entrypoint: "/usr/local/bin/pilot-agent", UID: 1337, CA: true},
	}
	for _, p := range append(programs(t), "dcm") {
		want[p] = imageWant{Ref: "dcm.local/" + p + ":latest", Entrypoint: "/usr/local/bin/" + p, UID: 65532, CA: true}
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, name+".tar")
			_, err := os.Stat(file)
			require.NoError(t, err, "run make images")
			require.Empty(t, inspectImage(t, file, w))
		})
	}
}

// inspectImage reads an OCI image-layout tarball with the standard library
// alone (not with the library that wrote it) and returns what is wrong with
// it; an unreadable tarball fails the test.
func inspectImage(t *testing.T, file string, want imageWant) []string {
	t.Helper()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	entries := map[string][]byte{}
	f, err := os.Open(file)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			entries[h.Name] = b
		}
	}
	blob := func(digest string) []byte {
		alg, hexSum, _ := strings.Cut(digest, ":")
		b, ok := entries["blobs/"+alg+"/"+hexSum]
		require.True(t, ok, "blob %s missing", digest)
		sum := sha256.Sum256(b)
		require.Equal(t, hexSum, hex.EncodeToString(sum[:]), "blob %s", digest)
		return b
	}
	require.Contains(t, entries, "oci-layout")

	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	}
	var index struct{ Manifests []desc }
	require.NoError(t, json.Unmarshal(entries["index.json"], &index))
	var manifestDigest string
	for _, m := range index.Manifests {
		name := m.Annotations["io.containerd.image.name"]
		if name == want.Ref || (strings.HasSuffix(want.Ref, ":") && strings.HasPrefix(name, want.Ref)) {
			manifestDigest = m.Digest
		}
	}
	require.NotEmpty(t, manifestDigest, "no manifest named %s in index.json: %s", want.Ref, entries["index.json"])

	var manifest struct {
		MediaType string `json:"mediaType"`
		Config    desc
		Layers    []desc
	}
	require.NoError(t, json.Unmarshal(blob(manifestDigest), &manifest))
	require.Equal(t, "application/vnd.oci.image.manifest.v1+json", manifest.MediaType)
	var config struct {
		Architecture, OS string
		Config           struct {
			User       string
			Entrypoint []string
			Labels     map[string]string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	require.NoError(t, json.Unmarshal(blob(manifest.Config.Digest), &config))
	if config.OS != "linux" || config.Architecture != runtime.GOARCH {
		bad("platform %s/%s, want linux/%s", config.OS, config.Architecture, runtime.GOARCH)
	}
	if u, g, _ := strings.Cut(config.Config.User, ":"); u != strconv.Itoa(want.UID) || g != u {
		bad("user %q, want %d:%d (numeric, so runAsNonRoot can check it)", config.Config.User, want.UID, want.UID)
	}
	if len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != want.Entrypoint {
		bad("entrypoint %q, want [%s]", config.Config.Entrypoint, want.Entrypoint)
	}
	if config.Config.Labels["org.opencontainers.image.title"] == "" {
		bad("no org.opencontainers.image.title label")
	}
	require.Len(t, config.RootFS.DiffIDs, len(manifest.Layers))

	// The files of every layer, later layers over earlier ones.
	files := map[string][]byte{}
	modes := map[string]int64{}
	for i, l := range manifest.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blob(l.Digest)))
		require.NoError(t, err, "layer %s (%s)", l.Digest, l.MediaType)
		raw, err := io.ReadAll(zr)
		require.NoError(t, err)
		sum := sha256.Sum256(raw)
		require.Equal(t, config.RootFS.DiffIDs[i], "sha256:"+hex.EncodeToString(sum[:]), "diff_id of layer %d", i)
		lr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			name := path.Clean("/" + h.Name)
			switch base := path.Base(name); base {
			case "sh", "bash", "dash", "ash", "busybox":
				bad("a shell in layer %d: %s", i, name)
			}
			if h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(lr)
				require.NoError(t, err)
				files[name], modes[name] = b, h.Mode
			}
		}
	}

	bin, ok := files[want.Entrypoint]
	switch {
	case !ok:
		bad("no %s", want.Entrypoint)
	case modes[want.Entrypoint]&0o111 == 0:
		bad("%s is not executable (mode %o)", want.Entrypoint, modes[want.Entrypoint])
	default:
		e, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			bad("%s is not an ELF binary: %v", want.Entrypoint, err)
			break
		}
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				bad("%s is not static: it has an interpreter", want.Entrypoint)
			}
		}
		if libs, _ := e.ImportedLibraries(); len(libs) > 0 {
			bad("%s is not static: it needs %v", want.Entrypoint, libs)
		}
	}
	if want.CA {
		if !x509.NewCertPool().AppendCertsFromPEM(files[caBundle]) {
			bad("no CA certificate in %s", caBundle)
		}
		uid := ":" + strconv.Itoa(want.UID) + ":"
		if !bytes.Contains(files["/etc/passwd"], []byte(uid+strconv.Itoa(want.UID)+":")) {
			bad("/etc/passwd has no user %d: %q", want.UID, files["/etc/passwd"])
		}
		if !bytes.Contains(files["/etc/group"], []byte(uid)) {
			bad("/etc/group has no group %d: %q", want.UID, files["/etc/group"])
		}
	}
	return problems
}
