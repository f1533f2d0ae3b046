package allinone_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestEMCOKeysAsEMCODecodes: the EMCO dialect reads a body's keys as
// EMCO's encoding/json does, whatever their case, ignoring (and listing)
// the keys it does not know; the project's dialect refuses the same
// bodies naming the field (docs/emco.md, "Keys").
func TestEMCOKeysAsEMCODecodes(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	registerClusters(t, s, r)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"keys"}}`)
	base := "/v2/projects/keys/logical-clouds"
	lc := base + "/lc-keys"

	// send sends body in dialect and requires the status; it answers the
	// Dcm-Ignored-Fields header and the body.
	send := func(code int, dialect, method, path, body string) (string, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Dcm-Dialect", dialect)
		resp, err := s.Admin.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, code, resp.StatusCode, "%s %s (%s): %s", method, path, dialect, b)
		return resp.Header.Get("Dcm-Ignored-Fields"), string(b)
	}

	lcBody := `{"Metadata":{"Name":"lc-keys","userdata1":"u1"},"spec":{"NameSpace":"ns-keys","LEVEL":"1",
		"User":{"username":"user-1","Type":"certificate"},"color":"blue"},"tenant":"x"}`
	_, answer := send(400, "dcm", "POST", base, lcBody)
	require.Contains(t, answer, `"field":"Metadata"`, "the project's dialect names the first unknown field")
	ignored, _ := send(201, "emco", "POST", base, lcBody)
	require.Equal(t, "spec.color, tenant", ignored)
	got := decodeObject(t, r.Want(200, "GET", lc, ""))
	require.Equal(t, map[string]any{"name": "lc-keys", "description": "", "userData1": "u1", "userData2": ""}, got["metadata"])
	spec := asObject(t, got["spec"])
	require.Equal(t, "ns-keys", spec["namespace"])
	require.Equal(t, "standard", spec["level"])
	require.Equal(t, "user-1", asObject(t, spec["user"])["user-name"])

	// The key EMCO's own examples write (examples/*: "loadbalancerIp").
	refBody := `{"metadata":{"name":"ref-c1"},"spec":{"clusterprovider":"edge","Cluster":"c1","loadbalancerIp":"10.0.0.2","certificate":"","site":"a"}}`
	_, answer = send(400, "dcm", "POST", lc+"/cluster-references", refBody)
	require.Contains(t, answer, `"field":"spec.Cluster"`)
	ignored, _ = send(201, "emco", "POST", lc+"/cluster-references", refBody)
	require.Equal(t, "spec.site", ignored)
	require.JSONEq(t, `{"metadata":{"name":"ref-c1","description":"","userData1":"","userData2":""},"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"10.0.0.2"}`,
		r.Want(200, "GET", lc+"/cluster-references/ref-c1", ""))

	permBody := `{"METADATA":{"name":"perm-keys"},"Spec":{"Namespace":"ns-keys","apigroups":[""],"resources":["pods"],"VERBS":["get"],"scope":"all"}}`
	_, answer = send(400, "dcm", "POST", lc+"/user-permissions", permBody)
	require.Contains(t, answer, `"field":"METADATA"`)
	ignored, _ = send(201, "emco", "POST", lc+"/user-permissions", permBody)
	require.Equal(t, "spec.scope", ignored)
	perm := decodeObject(t, r.Want(200, "GET", lc+"/user-permissions/perm-keys", ""))
	require.Equal(t, "perm-keys", perm["permission-name"])
	require.Equal(t, []any{"get"}, perm["verbs"])
	require.Equal(t, []any{"pods"}, perm["resources"])

	// A body without EMCO's own shape: the message's fields.
	quota := `{"metadata":{"NAME":"q-keys"},"SPEC":{"pods":"5"},"owner":"x"}`
	_, answer = send(400, "dcm", "POST", lc+"/cluster-quotas", quota)
	require.Contains(t, answer, `"field":"NAME"`)
	ignored, _ = send(201, "emco", "POST", lc+"/cluster-quotas", quota)
	require.Equal(t, "owner", ignored)
	require.Equal(t, map[string]any{"pods": "5"}, decodeObject(t, r.Want(200, "GET", lc+"/cluster-quotas/q-keys", ""))["spec"])
}
