package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
)

// ignoredBy sends body in dialect (the header) through dialects and
// readBody, and answers what the route saw and the Dcm-Ignored-Fields
// answer header, or the refusal.
func ignoredBy(t *testing.T, dialect, method, path, body string) (seen, ignored string, code int, answer string) {
	t.Helper()
	routed := readBody(func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		seen = string(b)
		w.WriteHeader(299)
	})
	h := dialects(DialectDCM, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { routed(w, r, nil) }))
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set(DialectHeader, dialect)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return seen, rec.Header().Get(IgnoredHeader), rec.Code, rec.Body.String()
}

func TestEMCODialectReadsKeysAsEMCO(t *testing.T) {
	t.Parallel()
	lcs := "/v2/projects/p/logical-clouds"
	traffic := "/v2/projects/p/rb/app/v1/traffic-intent-groups/g/intraclusterservice"
	for _, c := range []struct {
		name, method, path, body, want, ignored string
		// strict is the field the project's dialect refuses before the
		// decoder ("": it passes the body on as sent).
		strict string
	}{
		{"logical cloud in other cases, unknown keys at each level", "POST", lcs,
			`{"Metadata":{"NAME":"lc1","userdata1":"u","colour":"red"},"SPEC":{"Namespace":"ns","Level":"1","labels":{"Geo":"eu"},
				"user":{"username":"u1","TYPE":"certificate","userpermissions":[{"metadata":{"name":"p"},
				"Spec":{"apigroups":[""],"RESOURCES":["pods"],"verbs":["get"],"extra":1}}]},"owner":"x"},"unknown":true}`,
			`{"metadata":{"name":"lc1","userData1":"u"},"spec":{"namespace":"ns","level":"1","labels":[{"key":"Geo","value":"eu"}],
				"user":{"user-name":"u1","type":"certificate","user-permissions":[{"metadata":{"name":"p"},"permission-name":"p",
				"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}}}`,
			"metadata.colour, spec.owner, spec.user.userPermissions[0].spec.extra, unknown", ""},
		{"cluster reference as EMCO's examples spell it", "POST", lcs + "/lc1/cluster-references",
			`{"metadata":{"name":"r"},"spec":{"clusterprovider":"p","Cluster":"c","loadbalancerIp":"0.0.0.0","certificate":"","zone":"a"}}`,
			`{"metadata":{"name":"r"},"cluster-provider":"p","cluster-name":"c","loadbalancer-ip":"0.0.0.0"}`, "spec.zone", "spec.Cluster"},
		{"user permission, the project's keys in other cases", "POST", lcs + "/lc1/user-permissions",
			`{"Permission-Name":"p","NAMESPACE":"ns","apigroups":["apps"],"Resources":["deployments"],"verbs":["get"],"users":[],"x":1}`,
			`{"permission-name":"p","namespace":"ns","apiGroups":["apps"],"resources":["deployments"],"verbs":["get"],"users":[]}`, "x", ""},
		{"a body with no EMCO shape: the message's fields, a Struct's keys kept", "POST", lcs + "/lc1/cluster-quotas",
			`{"METADATA":{"Name":"q"},"Spec":{"Limits.CPU":"40"},"x":1}`,
			`{"metadata":{"name":"q"},"spec":{"Limits.CPU":"40"}}`, "x", ""},
		{"the seed's one-key items keep their id", "POST", traffic,
			`{"Name":"i","connectivityresource":[{"svc1":{"Port":"80","zz":1}}]}`,
			`{"name":"i","connectivityResource":[{"svc1":{"port":"80"}}]}`, "connectivityResource[0].svc1.zz", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen, ignored, code, answer := ignoredBy(t, DialectEMCO, c.method, c.path, c.body)
			require.Equal(t, 299, code, answer)
			require.JSONEq(t, c.want, seen)
			require.Equal(t, c.ignored, ignored)
			// The project's dialect reads the body as sent: its decoder
			// refuses the first key it does not know.
			seen, ignored, code, answer = ignoredBy(t, DialectDCM, c.method, c.path, c.body)
			require.Empty(t, ignored)
			if c.strict != "" {
				require.Equal(t, http.StatusBadRequest, code, answer)
				require.Contains(t, answer, `"field":"`+c.strict+`"`)
				return
			}
			require.Equal(t, 299, code, answer)
			require.JSONEq(t, c.body, seen)
		})
	}
	// What the EMCO dialect passes on decodes strictly.
	seen, _, _, _ := ignoredBy(t, DialectEMCO, "POST", lcs+"/lc1/cluster-quotas", `{"metadata":{"name":"q"},"SPEC":{"pods":"1"},"x":1}`)
	var q *quotav1.Quota
	require.NoError(t, lenient().NewDecoder(strings.NewReader(seen)).Decode(&q))
	require.Equal(t, "q", q.GetMetadata().GetName())
	seen, _, _, _ = ignoredBy(t, DialectEMCO, "POST", traffic, `{"NAME":"i","connectivityResource":[{"svc1":{"MutualTLS":"true"}}]}`)
	var ic *trafficv1.ConnectivityIntent
	require.NoError(t, lenient().NewDecoder(strings.NewReader(seen)).Decode(&ic))
	require.Equal(t, "svc1", ic.GetConnectivityResource()[0].GetId())
	require.True(t, ic.GetConnectivityResource()[0].GetMutualTls())
	var lc *corev1.LogicalCloud
	require.ErrorContains(t, lenient().NewDecoder(strings.NewReader(`{"Metadata":{"name":"lc1"}}`)).Decode(&lc), `unknown field "Metadata"`,
		"the project's decoder is strict")
}

func TestEMCODialectRefusesAKeyTwice(t *testing.T) {
	t.Parallel()
	for body, field := range map[string]string{
		`{"metadata":{"name":"a","Name":"b"}}`:                                    `"field":"metadata.name"`,
		`{"metadata":{"name":"q"},"spec":{},"SPEC":{}}`:                           `"field":"spec"`,
		`{"metadata":{"name":"r"},"spec":{"Cluster":"a","CLUSTER":"b"}}`:          `"field":"spec.cluster"`,
		`{"metadata":{"name":"r"},"spec":{"cluster":"a"},"Spec":{"cluster":"b"}}`: `"field":"spec"`,
	} {
		_, _, code, answer := ignoredBy(t, DialectEMCO, "POST", "/v2/projects/p/logical-clouds/lc1/cluster-references", body)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, answer, field, body)
	}
}
