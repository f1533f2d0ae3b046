// Package apitest is the REST side of the all-in-one program's tests: a
// client session against a running stack, the test clusters registered,
// projects and tenants' logical clouds made, statuses watched until they
// settle. The packages that test the program (services/allinone and its
// node tests, which run beside it as a package of their own) share it.
package apitest

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// REST is a REST session as one client against one stack.
type REST struct {
	T    testing.TB
	C    *http.Client
	Base string
}

// NewREST is an admin session against s.
func NewREST(t testing.TB, s *stacktest.Stack) *REST {
	return &REST{T: t, C: s.Admin, Base: s.URL}
}

// Call sends one request with a JSON body ("" for none) and returns the
// status and the body.
func Call(t testing.TB, c *http.Client, method, url, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// Want sends a request and requires the status; it returns the body.
func (r *REST) Want(code int, method, path, body string) string {
	r.T.Helper()
	got, b := Call(r.T, r.C, method, r.Base+path, body)
	require.Equal(r.T, code, got, "%s %s: %s", method, path, b)
	return string(b)
}

// Is sends a request and requires the status and the JSON body.
func (r *REST) Is(code int, method, path, body, want string) {
	r.T.Helper()
	require.JSONEq(r.T, want, r.Want(code, method, path, body), "%s %s", method, path)
}

// LCStatus is the part of GET .../status the tests read.
type LCStatus struct {
	State      string   `json:"state"`
	Stopped    bool     `json:"stopped"`
	Ready      int      `json:"ready"`
	Total      int      `json:"total"`
	LastErrors []string `json:"last-errors"`
	Clusters   []struct {
		Provider  string `json:"cluster-provider"`
		Name      string `json:"cluster-name"`
		State     string `json:"state"`
		Ready     int    `json:"ready"`
		Total     int    `json:"total"`
		LastError string `json:"last-error"`
		Resources []struct {
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			State     string `json:"state"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last-error"`
		} `json:"resources"`
	} `json:"clusters"`
}

// Status is GET .../status of the logical cloud at path lc.
func (r *REST) Status(lc string) LCStatus {
	r.T.Helper()
	var st LCStatus
	require.NoError(r.T, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
	return st
}

// Watch reads GET .../status?watch=true to its end and returns every
// status it streamed.
func (r *REST) Watch(lc string) []LCStatus {
	r.T.Helper()
	req, err := http.NewRequest("GET", r.Base+lc+"/status?watch=true", nil)
	require.NoError(r.T, err)
	c := *r.C
	c.Timeout = 3 * time.Minute
	resp, err := c.Do(req)
	require.NoError(r.T, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(r.T, 200, resp.StatusCode)
	var out []LCStatus
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Result *LCStatus       `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		require.NoError(r.T, json.Unmarshal(sc.Bytes(), &line), "%s", sc.Text())
		require.Nil(r.T, line.Error, "the watch failed: %s", line.Error)
		out = append(out, *line.Result)
	}
	require.NoError(r.T, sc.Err())
	require.NotEmpty(r.T, out)
	return out
}

// Settle watches until the logical cloud settles and requires the state.
func (r *REST) Settle(lc, want string) LCStatus {
	r.T.Helper()
	all := r.Watch(lc)
	last := all[len(all)-1]
	require.Equal(r.T, want, last.State, "%+v", last)
	return last
}

// Kubeconfig reads a kubeconfig and requires it to be YAML.
func (r *REST) Kubeconfig(path string) []byte {
	r.T.Helper()
	resp, err := r.C.Get(r.Base + path)
	require.NoError(r.T, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(r.T, err)
	require.Equal(r.T, 200, resp.StatusCode, "GET %s: %s", path, b)
	require.Equal(r.T, "application/yaml", resp.Header.Get("Content-Type"))
	return b
}

// RegisterHarness registers the test clusters under provider "edge", each
// labelled "harness".
func RegisterHarness(t testing.TB, r *REST, h *kubetest.Harness) {
	t.Helper()
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	for _, c := range h.Clusters {
		body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": c.Name},
			"spec": map[string]any{"kubeconfig": string(c.Kubeconfig), "labels": []string{"harness"}}})
		require.NoError(t, err)
		r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	}
}

// Tenants is the whole program on the shared test clusters, with an admin
// REST client and a project-admin one per project.
type Tenants struct {
	T     *testing.T
	S     *stacktest.Stack
	Admin *REST
	H     *kubetest.Harness
}

// StartTenantsOn starts the program with the clusters of h registered and
// the projects made.
func StartTenantsOn(t *testing.T, h *kubetest.Harness, projects ...string) *Tenants {
	s := stacktest.Start(t)
	r := NewREST(t, s)
	RegisterHarness(t, r, h)
	for _, p := range projects {
		r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"`+p+`"}}`)
	}
	return &Tenants{T: t, S: s, Admin: r, H: h}
}

// ProjectAdmin is a REST client with the project-admin role of project.
func (e *Tenants) ProjectAdmin(project string) *REST {
	cert := e.S.Issue(e.T, pki.Identity{Subject: "pa-" + project, Role: pki.RoleProjectAdmin, Project: project}, time.Now().Add(time.Hour))
	return &REST{T: e.T, C: e.S.Client(&cert), Base: e.S.URL}
}

// TenantLC creates a standard logical cloud with one certificate user and
// permissions on ConfigMaps, pods and quotas, referencing the clusters. It
// returns the logical cloud's path; it does not apply it.
func (e *Tenants) TenantLC(project, lc, ns, user string, clusters ...string) string {
	path := "/v2/projects/" + project + "/logical-clouds/" + lc
	e.Admin.Want(201, "POST", "/v2/projects/"+project+"/logical-clouds", fmt.Sprintf(`{
	  "metadata": {"name": %q},
	  "spec": {"namespace": %q, "user": {"user-name": %q, "user-permissions": [
	    {"permission-name": "cm", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "delete"]},
	    {"permission-name": "pods", "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create"]},
	    {"permission-name": "quota", "apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "list"]}
	  ]}}}`, lc, ns, user))
	for _, c := range clusters {
		e.Admin.Want(201, "POST", path+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c+`"}`)
	}
	return path
}

// Eventually polls f until it holds or a minute has gone.
func Eventually(t testing.TB, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PEMCerts parses every certificate of a PEM bundle.
func PEMCerts(t testing.TB, text []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, text = pem.Decode(text)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		out = append(out, c)
	}
	require.NotEmpty(t, out)
	return out
}

// Pool is a certificate pool of every certificate of a PEM bundle.
func Pool(t testing.TB, pemText string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, c := range PEMCerts(t, []byte(pemText)) {
		p.AddCert(c)
	}
	return p
}

// MeshRevision is a logical cloud's Istio revision, as its service mesh
// document (GET .../service-mesh) tells it.
func MeshRevision(t testing.TB, r *REST, project, lc string) string {
	t.Helper()
	var doc struct {
		Revision string `json:"revision"`
	}
	body := r.Want(200, "GET", "/v2/projects/"+project+"/logical-clouds/"+lc+"/service-mesh", "")
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	require.NotEmpty(t, doc.Revision, body)
	return doc.Revision
}

// MeshBody is a seed 000 logical cloud with its own service mesh.
func MeshBody(name string) string {
	return fmt.Sprintf(`{"metadata": {"name": %q}, "spec": {"namespace": "%s-ns", "service-mesh": {"enabled": true}}}`, name, name)
}

// QuotaUsage is the part of GET .../quota-usage the tests read.
type QuotaUsage struct {
	Clusters []struct {
		Name   string `json:"cluster-name"`
		Quotas []struct {
			Name string            `json:"name"`
			Hard map[string]string `json:"hard"`
			Used map[string]string `json:"used"`
		} `json:"quotas"`
		Error string `json:"error"`
	} `json:"clusters"`
}

// MeshBundle is the part of the REST bundle the tests read.
type MeshBundle struct {
	CaCert       string   `json:"ca-cert"`
	CertChain    string   `json:"cert-chain"`
	RootCert     string   `json:"root-cert"`
	Root         string   `json:"root"`
	TrustedRoots []string `json:"trusted-roots"`
	TrustDomain  string   `json:"trust-domain"`
}

// Bundle is GET /v1/cadist/... of a logical cloud on one cluster: the CA
// material DCM serves for its mesh there.
func (r *REST) Bundle(project, lc, cluster string) MeshBundle {
	r.T.Helper()
	var b MeshBundle
	require.NoError(r.T, json.Unmarshal([]byte(r.Want(200, "GET",
		"/v1/cadist/projects/"+project+"/logicalclouds/"+lc+"/clusters/"+cluster, "")), &b))
	return b
}

// TrafficStatus is the part of a group's GET .../status the tests read.
type TrafficStatus struct {
	State      string   `json:"state"`
	Ready      int      `json:"ready"`
	Total      int      `json:"total"`
	LastErrors []string `json:"last-errors"`
	Clusters   []struct {
		Name      string `json:"cluster-name"`
		State     string `json:"state"`
		Resources []struct {
			Kind  string `json:"kind"`
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"resources"`
	} `json:"clusters"`
	DNS []struct {
		ExternalName string   `json:"externalName"`
		State        string   `json:"state"`
		LastError    string   `json:"last-error"`
		Records      []string `json:"records"`
		Clusters     []string `json:"clusters"`
	} `json:"dns"`
}

// SettleTraffic polls a group's status until it is in state want with
// every object at its goal.
func (r *REST) SettleTraffic(group, want string) TrafficStatus {
	r.T.Helper()
	var st TrafficStatus
	deadline := time.Now().Add(3 * time.Minute)
	for {
		require.NoError(r.T, json.Unmarshal([]byte(r.Want(200, "GET", group+"/status", "")), &st))
		if st.State == want && st.Ready == st.Total {
			return st
		}
		if time.Now().After(deadline) {
			r.T.Fatalf("group %s did not become %s: %+v", group, want, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
