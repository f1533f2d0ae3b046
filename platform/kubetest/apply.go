package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// ApplyOptions change Cluster.Apply.
type ApplyOptions struct {
	// DryRun has the API server check and admit the object without
	// storing it.
	DryRun bool
	// Strict refuses a field the kind's schema does not have
	// (fieldValidation=Strict) instead of dropping it: admitting then
	// means the object fits the schema.
	Strict bool
	// FieldManager of the apply; empty is "kubetest".
	FieldManager string
}

// servedWait is how long Apply waits for a kind to be served: a CRD just
// made Established may not be for a moment.
const servedWait = 30 * time.Second

// Apply server-side applies one object (JSON or YAML) with the cluster's
// admin credentials, finding its resource through the API server's
// discovery (any kind the cluster serves, custom ones included).
func (c *Cluster) Apply(ctx context.Context, manifest []byte, o ApplyOptions) error {
	doc, err := yaml.YAMLToJSON(manifest)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name, Namespace string }
	}
	if err := json.Unmarshal(doc, &meta); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	what := fmt.Sprintf("%s %s/%s on %s", meta.Kind, meta.Metadata.Namespace, meta.Metadata.Name, c.Name)
	client, err := c.HTTPClient()
	if err != nil {
		return err
	}
	base := "/apis/" + meta.APIVersion
	if meta.APIVersion == "v1" {
		base = "/api/v1"
	}
	res, err := c.resourceOf(ctx, client, base, meta.Kind)
	if err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	path := base
	if res.Namespaced {
		path += "/namespaces/" + url.PathEscape(meta.Metadata.Namespace)
	}
	manager := o.FieldManager
	if manager == "" {
		manager = "kubetest"
	}
	q := url.Values{"fieldManager": {manager}, "force": {"true"}}
	if o.Strict {
		q.Set("fieldValidation", "Strict")
	}
	if o.DryRun {
		q.Set("dryRun", "All")
	}
	path += "/" + res.Name + "/" + url.PathEscape(meta.Metadata.Name) + "?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, c.Server+path, bytes.NewReader(doc))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/apply-patch+yaml")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("apply %s: %s: %s", what, resp.Status, body)
	}
	return nil
}

// errNotServed: the API server does not serve the kind (yet).
var errNotServed = errors.New("not served")

// resourceOf finds kind's resource in the discovery document at base
// (/api/v1, /apis/<group>/<version>), waiting up to servedWait for it.
func (c *Cluster) resourceOf(ctx context.Context, client *http.Client, base, kind string) (metav1.APIResource, error) {
	deadline := time.Now().Add(servedWait)
	for {
		res, err := discover(ctx, client, c.Server+base, kind)
		if !errors.Is(err, errNotServed) || time.Now().After(deadline) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func discover(ctx context.Context, client *http.Client, u, kind string) (metav1.APIResource, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return metav1.APIResource{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return metav1.APIResource{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusNotFound {
		return metav1.APIResource{}, fmt.Errorf("%s: %w", u, errNotServed)
	}
	if resp.StatusCode != http.StatusOK {
		return metav1.APIResource{}, fmt.Errorf("discovery %s: %s", u, resp.Status)
	}
	var list metav1.APIResourceList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return metav1.APIResource{}, fmt.Errorf("discovery %s: %w", u, err)
	}
	for _, r := range list.APIResources {
		if r.Kind == kind && !bytes.ContainsRune([]byte(r.Name), '/') { // not a subresource
			return r, nil
		}
	}
	return metav1.APIResource{}, fmt.Errorf("kind %s at %s: %w", kind, u, errNotServed)
}
