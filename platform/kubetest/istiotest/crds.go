package istiotest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// crdFile is the CRDs' file in the istio.io/api module, byte-identical to
// the base chart's files/crd-all.gen.yaml (docs/mesh.md).
const crdFile = "kubernetes/customresourcedefinitions.gen.yaml"

var crds struct {
	once sync.Once
	b    []byte
	err  error
}

// CRDs returns Istio's CustomResourceDefinitions (15 documents of one YAML
// stream) as the istio.io/api version pinned in test/istio ships them, read
// from the module cache (downloaded if missing). Product tests compare what
// DCM renders with it.
func CRDs() ([]byte, error) {
	crds.once.Do(func() {
		root, err := kubetest.RepoRoot()
		if err != nil {
			crds.err = err
			return
		}
		dir, err := APIModuleDir(context.Background(), root)
		if err != nil {
			crds.err = err
			return
		}
		crds.b, crds.err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(crdFile)))
	})
	return crds.b, crds.err
}

// APIModuleDir is the module cache's directory of the istio.io/api version
// test/istio requires (`go mod download -json`, which downloads it if
// needed and does nothing otherwise).
func APIModuleDir(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "istio.io/api")
	cmd.Dir = filepath.Join(root, "test", "istio")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("find istio.io/api in the module cache: %w\n%s%s", err, out, stderr.Bytes())
	}
	var m struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download istio.io/api: %w", err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download istio.io/api: %q (dir %q)", m.Error, m.Dir)
	}
	return m.Dir, nil
}

// InstallCRDs applies Istio's CRDs to the cluster (server-side apply, field
// manager istiotest) and waits until each is Established. The product
// installs them through its own rollouts; this is for tests that need them
// before or without that.
func InstallCRDs(ctx context.Context, c *kubetest.Cluster) error {
	b, err := CRDs()
	if err != nil {
		return err
	}
	objs, err := SplitYAML(b)
	if err != nil {
		return err
	}
	var names []string
	for _, obj := range objs {
		name, err := Apply(ctx, c, obj)
		if err != nil {
			return err
		}
		names = append(names, name)
	}
	client, err := c.HTTPClient()
	if err != nil {
		return err
	}
	for _, name := range names {
		err := pollUntil(ctx, 60*time.Second, func() error {
			var crd struct {
				Status struct {
					Conditions []struct{ Type, Status, Message string }
				}
			}
			if err := getJSON(ctx, client, c.Server+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, &crd); err != nil {
				return err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == "Established" && cond.Status == "True" {
					return nil
				}
			}
			return fmt.Errorf("CRD %s is not Established: %+v", name, crd.Status.Conditions)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// SplitYAML decodes a YAML stream into one JSON document per object,
// skipping empty documents.
func SplitYAML(b []byte) ([][]byte, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out [][]byte
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		j, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
}

// Apply server-side applies one object (JSON or YAML) with the admin
// credential, field manager istiotest, forcing conflicts, and returns its
// name. Only the kinds in the table above are known.
func Apply(ctx context.Context, c *kubetest.Cluster, obj []byte) (string, error) {
	docs, err := SplitYAML(obj)
	if err != nil {
		return "", err
	}
	if len(docs) != 1 {
		return "", fmt.Errorf("apply: %d objects, want 1", len(docs))
	}
	var meta struct{ Metadata struct{ Name string } }
	if err := json.Unmarshal(docs[0], &meta); err != nil {
		return "", err
	}
	return meta.Metadata.Name, c.Apply(ctx, docs[0], kubetest.ApplyOptions{FieldManager: "istiotest"})
}

func getJSON(ctx context.Context, client *http.Client, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	return do(client, req, out)
}

// do sends req and decodes a 2xx answer's JSON into out (if not nil).
func do(client *http.Client, req *http.Request, out any) error {
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(body)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// pollUntil calls f until it succeeds or timeout passes, and then returns
// f's last error.
func pollUntil(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
