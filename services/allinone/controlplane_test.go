package allinone_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// ownCA is a CA of the body's own, as seed 002's control-plane body gives
// it: a self-signed CA that is its own root and chain.
func ownCA(t *testing.T) map[string]string {
	t.Helper()
	ca, err := pki.NewRootCA("own mesh CA", time.Hour, 1)
	require.NoError(t, err)
	der, err := x509.MarshalECPrivateKey(ca.Key)
	require.NoError(t, err)
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}))
	return map[string]string{"ca-cert": cert, "ca-key": string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})),
		"root-cert": cert, "cert-chain": cert}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestControlPlaneBody: seed 002's POST .../logical-clouds/control-plane,
// which core serves, over the whole program (data only, no cluster): it
// creates the logical cloud with its user, permission and quota and the
// mesh on; turns an existing one's mesh on; takes a CA of its own, or
// refuses it (400 naming the field) leaving no logical cloud; and is a
// project-admin's of that project only.
func TestControlPlaneBody(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	admin := apitest.NewREST(t, s)
	admin.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	admin.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p2"}}`)
	paOf := func(project string) *apitest.REST {
		cert := s.Issue(t, pki.Identity{Subject: "pa-" + project, Role: pki.RoleProjectAdmin, Project: project}, time.Now().Add(time.Hour))
		return &apitest.REST{T: t, C: s.Client(&cert), Base: s.URL}
	}
	r := paOf("p1")
	const lcs = "/v2/projects/p1/logical-clouds"

	// The seed's body, its names made valid, the user's CSR its text.
	seed := `{"name": "logical-cloud-1", "namespace": "logical-cloud-1-istio-system", "ca-cert": "", "ca-key": "", "root-cert": "", "cert-chain": "",
	  "user": {"name": "user-2", "type": "certificate", "certificate": ` + jsonOf(t, csrPEM(t, "p1", "logical-cloud-1", "user-2")) + `,
	    "permissions": {"apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
	    "quota": {"cpu": "200", "memory": "300Gi", "pods": "200", "dummy/dummyResource": 30}}}`
	got := decodeMap(t, r.Want(201, "POST", lcs+"/control-plane", seed))
	require.Equal(t, "logical-cloud-1", got["name"])
	require.Equal(t, "user-2", got["user"])
	require.Equal(t, "logical cloud and associated user successfully created", got["message"])
	lc := decodeMap(t, r.Want(200, "GET", lcs+"/logical-cloud-1", ""))
	spec := lc["spec"].(map[string]any)
	require.Equal(t, map[string]any{"enabled": true, "namespace": "logical-cloud-1-istio-system"}, spec["service-mesh"])
	require.Equal(t, "logical-cloud-1", spec["namespace"])
	require.Equal(t, "user-2", spec["user"].(map[string]any)["user-name"])
	require.Contains(t, r.Want(200, "GET", lcs+"/logical-cloud-1/user/user-2", ""), "BEGIN CERTIFICATE REQUEST")
	r.Is(200, "GET", lcs+"/logical-cloud-1/user-permissions", "", `[{"permission-name":"user-2","namespace":"logical-cloud-1",
		"apiGroups":["stable.example.com"],"resources":["secrets","pods"],"verbs":["get","watch","list","create"],"metadata":null,"users":["user-2"]}]`)
	r.Is(200, "GET", lcs+"/logical-cloud-1/cluster-quotas", "", `[{"metadata":{"name":"user-2-quota","description":"quota of user user-2","userData1":"","userData2":""},
		"spec":{"cpu":"200","memory":"300Gi","pods":"200","dummy/dummyResource":"30"}`+quotaTail("user-2-quota", "user-2")+`}]`)
	r.Want(404, "GET", lcs+"/logical-cloud-1/control-plane", "") // cadist's intermediates: no record
	// Again with a user: the logical cloud exists (the seed's other route adds users).
	r.Want(409, "POST", lcs+"/control-plane", seed)

	// An existing logical cloud without a mesh: turned on, conditionally.
	r.Want(201, "POST", lcs, `{"name": "lc-2"}`)
	got = decodeMap(t, r.Want(201, "POST", lcs+"/control-plane", `{"name": "lc-2", "namespace": "lc-2-mesh", "ca-cert": "", "ca-key": "", "root-cert": "", "cert-chain": ""}`))
	require.Equal(t, "service mesh enabled on the logical cloud", got["message"])
	spec = decodeMap(t, r.Want(200, "GET", lcs+"/lc-2", ""))["spec"].(map[string]any)
	require.Equal(t, map[string]any{"enabled": true, "namespace": "lc-2-mesh"}, spec["service-mesh"])
	require.Equal(t, "lc-2", spec["user"].(map[string]any)["user-name"], "its user kept")
	// Its own workload namespace is not a control plane's.
	require.Contains(t, r.Want(400, "POST", lcs+"/control-plane", `{"name": "lc-2", "namespace": "lc-2"}`), `"field":"namespace"`)

	// A CA of its own: kept by the service mesh service, its key never answered.
	ca := ownCA(t)
	body := map[string]any{"name": "lc-3", "namespace": "lc-3-istio-system", "user": map[string]any{"name": "u3"}}
	for k, v := range ca {
		body[k] = v
	}
	r.Want(201, "POST", lcs+"/control-plane", jsonOf(t, body))
	cp := decodeMap(t, r.Want(200, "GET", lcs+"/lc-3/control-plane", ""))
	require.Equal(t, true, cp["custom-ca"])
	require.Empty(t, cp["ca-key"])
	require.True(t, decodeMap(t, r.Want(200, "GET", lcs+"/lc-3", ""))["spec"].(map[string]any)["service-mesh"].(map[string]any)["enabled"].(bool))

	// A bad CA: 400 naming the field, and no logical cloud left.
	for _, tc := range []struct {
		name, field string
		edit        func(b map[string]any)
	}{
		{"key missing", "ca-key", func(b map[string]any) { b["ca-key"] = "" }},
		{"cert not PEM", "ca-cert", func(b map[string]any) { b["ca-cert"] = "not pem" }},
		{"chain to another root", "cert-chain", func(b map[string]any) { b["root-cert"] = ownCA(t)["root-cert"] }},
	} {
		b := map[string]any{"name": "lc-bad", "namespace": "lc-bad-istio-system", "user": map[string]any{"name": "u4", "quota": map[string]any{"pods": "1"}}}
		for k, v := range ca {
			b[k] = v
		}
		tc.edit(b)
		require.Contains(t, r.Want(400, "POST", lcs+"/control-plane", jsonOf(t, b)), `"field":"`+tc.field+`"`, tc.name)
		r.Want(404, "GET", lcs+"/lc-bad", "")
		r.Want(404, "GET", lcs+"/lc-bad/control-plane", "")
	}
	require.NotContains(t, r.Want(200, "GET", lcs, ""), "lc-bad")
	// For an existing logical cloud a bad CA changes nothing either.
	r.Want(201, "POST", lcs, `{"name": "lc-5"}`)
	require.Contains(t, r.Want(400, "POST", lcs+"/control-plane", jsonOf(t, map[string]any{"name": "lc-5", "ca-cert": ca["ca-cert"]})), `"field":"ca-key"`)
	require.Contains(t, r.Want(200, "GET", lcs+"/lc-5", ""), `"service-mesh":null`)

	// A project-admin of another project: 403, nothing made.
	paOf("p2").Want(403, "POST", lcs+"/control-plane", strings.Replace(seed, "logical-cloud-1", "lc-6", 1))
	r.Want(404, "GET", lcs+"/lc-6", "")
}
