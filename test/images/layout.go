package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

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
// 0; istio-proxy, 1337, whom Istio's images run as), hosts resolution
// through DNS, and a /tmp. No shell, no package. Its
// times are the epoch's whatever the commit, so that every image has the
// same blob and a node stores it once.
func baseLayer() (v1.Layer, error) {
	ca, err := os.ReadFile(CABundle)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle (Debian: apt-get install ca-certificates): %w", err)
	}
	u, i := strconv.Itoa(UID), strconv.Itoa(IstioUID)
	return layer(time.Unix(0, 0).UTC(), []entry{
		{Path: "/etc", Mode: 0o755, Dir: true},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:" + u + ":\nistio-proxy:x:" + i + ":\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + u + ":" + u + ":nonroot:/home/nonroot:/sbin/nologin\nistio-proxy:x:" + i + ":" + i + ":istio-proxy:/:/sbin/nologin\n")},
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
