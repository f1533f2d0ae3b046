package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
)

// through sends a request through dialects(def) and readBody (as the
// router runs it once the route matched) and answers what the next
// handler saw: the body, the dialect chosen and the body kind; or, when
// they refused it, the error answer.
func through(t *testing.T, def, method, path, header, body string) (seen string, sp spoken, code int, answer string) {
	t.Helper()
	return throughAs(t, def, method, path, header, "application/json", body)
}

// throughAs is through with the request's Content-Type (none when empty).
func throughAs(t *testing.T, def, method, path, header, contentType, body string) (seen string, sp spoken, code int, answer string) {
	t.Helper()
	routed := readBody(func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, int64(len(b)), r.ContentLength)
		seen, sp = string(b), dialectOf(r.Context())
		w.WriteHeader(299)
	})
	h := dialects(def, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { routed(w, r, nil) }))
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if header != "" {
		req.Header.Set(DialectHeader, header)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == 299 {
		require.Equal(t, sp.dialect, rec.Header().Get(DialectHeader), "the answer says the dialect")
	}
	return seen, sp, rec.Code, rec.Body.String()
}

func TestDialectRewritesEMCOBodies(t *testing.T) {
	t.Parallel()
	lcs := "/v2/projects/proj1/logical-clouds"
	for _, c := range []struct {
		name, method, path, body, want, kind string
		emco                                 bool
	}{
		{"admin logical cloud", "POST", lcs,
			`{"metadata":{"name":"default"},"spec":{"labels":null,"level":"0","namespace":"","user":{"userName":"","type":""}}}`,
			`{"metadata":{"name":"default"},"spec":{"level":"0","namespace":"","user":{"user-name":"","type":""}}}`, kindLogicalCloud, true},
		{"labels as an object, in order, in either dialect", "PUT", lcs + "/lc1",
			`{"metadata":{"name":"lc1"},"spec":{"labels":{"perf":"max","geo":"eu"}}}`,
			`{"metadata":{"name":"lc1"},"spec":{"labels":[{"key":"geo","value":"eu"},{"key":"perf","value":"max"}]}}`, kindLogicalCloud, false},
		{"the project's own body is left as it is", "POST", lcs,
			`{"metadata":{"name":"lc1"},"spec":{"user":{"user-name":"u1","user-permissions":[{"permission-name":"p"}]}}}`,
			`{"metadata":{"name":"lc1"},"spec":{"user":{"user-name":"u1","user-permissions":[{"permission-name":"p"}]}}}`, kindLogicalCloud, false},
		{"EMCO permissions inside a logical cloud", "POST", lcs,
			`{"metadata":{"name":"lc1"},"spec":{"user":{"userName":"u1","userPermissions":[{"metadata":{"name":"p"},"spec":{"verbs":["get"]}}]}}}`,
			`{"metadata":{"name":"lc1"},"spec":{"user":{"user-name":"u1","user-permissions":[{"metadata":{"name":"p"},"permission-name":"p","verbs":["get"]}]}}}`, kindLogicalCloud, true},
		{"an EMCO body carries DCM's allow-ingress-from as it is", "PUT", lcs + "/lc1",
			`{"metadata":{"name":"lc1"},"spec":{"user":{"userName":"u1"},"allow-ingress-from":["lc2","proj2/lc3"]}}`,
			`{"metadata":{"name":"lc1"},"spec":{"user":{"user-name":"u1"},"allow-ingress-from":["lc2","proj2/lc3"]}}`, kindLogicalCloud, true},
		{"cluster reference", "POST", lcs + "/default/cluster-references",
			`{"metadata":{"name":"cluster1-ref"},"spec":{"certificate":"","clusterProvider":"provider1","cluster":"cluster1","loadBalancerIP":"0.0.0.0"}}`,
			`{"metadata":{"name":"cluster1-ref"},"cluster-provider":"provider1","cluster-name":"cluster1","loadbalancer-ip":"0.0.0.0"}`, kindReference, true},
		{"cluster reference, EMCO's older kebab keys in spec", "PUT", lcs + "/default/cluster-references/lc-cl-1",
			`{"metadata":{"name":"lc-cl-1"},"spec":{"cluster-provider":"p","cluster-name":"c","loadbalancer-ip":"0.0.0.0","certificate":""}}`,
			`{"metadata":{"name":"lc-cl-1"},"cluster-provider":"p","cluster-name":"c","loadbalancer-ip":"0.0.0.0"}`, kindReference, true},
		{"user permission", "POST", lcs + "/default/user-permissions",
			`{"metadata":{"name":"lc1-permission","description":"d"},"spec":{"namespace":"ns1","apiGroups":[""],"resources":["pods"],"verbs":["get"]}}`,
			`{"metadata":{"name":"lc1-permission","description":"d"},"permission-name":"lc1-permission","namespace":"ns1","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`, kindPermission, true},
		{"user permission without a name", "POST", lcs + "/default/user-permissions",
			`{"metadata":{"description":"d"},"spec":{"verbs":["get"]}}`,
			`{"metadata":{"description":"d"},"verbs":["get"]}`, kindPermission, true},
		{"a quota is the same in both", "POST", lcs + "/lc1/cluster-quotas",
			`{"metadata":{"name":"q"},"spec":{"limits.cpu":"40"}}`, `{"metadata":{"name":"q"},"spec":{"limits.cpu":"40"}}`, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen, sp, code, answer := through(t, DialectDCM, c.method, c.path, "", c.body)
			require.Equal(t, 299, code, answer)
			require.JSONEq(t, c.want, seen)
			require.Equal(t, c.kind, sp.kind)
			want := DialectDCM
			if c.emco {
				want = DialectEMCO
			}
			require.Equal(t, want, sp.dialect)
		})
	}
}

func TestDialectChoice(t *testing.T) {
	t.Parallel()
	emcoBody := `{"metadata":{"name":"r"},"spec":{"clusterProvider":"p","cluster":"c"}}`
	path := "/v2/projects/p/logical-clouds/lc/cluster-references"
	_, sp, _, _ := through(t, DialectEMCO, "GET", path, "", "")
	require.Equal(t, DialectEMCO, sp.dialect, "the gateway's default")
	_, sp, _, _ = through(t, DialectEMCO, "GET", path, "DCM", "")
	require.Equal(t, DialectDCM, sp.dialect, "the header chooses")
	_, sp, _, _ = through(t, DialectDCM, "POST", path, "", emcoBody)
	require.Equal(t, DialectEMCO, sp.dialect, "an EMCO body is answered in EMCO's shape")
	_, sp, _, _ = through(t, DialectDCM, "POST", path, "dcm", emcoBody)
	require.Equal(t, DialectDCM, sp.dialect, "the header wins over the body")
	_, _, code, answer := through(t, DialectDCM, "GET", path, "yaml", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, answer, `"field":"Dcm-Dialect"`)
	seen, _, _, _ := through(t, DialectDCM, "POST", path, "", `[1, 2`)
	require.Equal(t, `[1, 2`, seen, "what is no JSON object goes on as it was, for the decoder to refuse")
	twice := `{"permission-name":"a","permission-name":"b"}`
	seen, _, _, _ = through(t, DialectDCM, "POST", "/v2/projects/p/logical-clouds/lc/user-permissions", "", twice)
	require.Equal(t, twice, seen, "a body with nothing to rewrite goes on byte for byte (the decoder refuses the key given twice)")
}

// TestDialectWhateverContentType: the router decodes every body as JSON
// whatever its Content-Type (runtime.MIMEWildcard), as EMCO does
// (encoding/json on the body, the header unread), and curl -d, used in
// EMCO's docs, sends application/x-www-form-urlencoded. Such a body is
// read as EMCO's, keys folded, like a JSON one; a multipart form (turned
// into JSON before, on the clusters' routes only) is left as it is.
func TestDialectWhateverContentType(t *testing.T) {
	t.Parallel()
	path := "/v2/projects/p/logical-clouds"
	body := `{"metadata":{"name":"lc1"},"spec":{"namespace":"ns1","user":{"UserName":"u1","type":"certificate"}}}`
	want := `{"metadata":{"name":"lc1"},"spec":{"namespace":"ns1","user":{"user-name":"u1","type":"certificate"}}}`
	for _, ct := range []string{"application/json", "", "application/x-www-form-urlencoded", "text/plain; charset=utf-8", "application/merge-patch+json", "not a media type;;"} {
		seen, sp, code, answer := throughAs(t, DialectEMCO, "POST", path, "", ct, body)
		require.Equal(t, 299, code, "%q: %s", ct, answer)
		require.JSONEq(t, want, seen, "Content-Type %q", ct)
		require.Equal(t, DialectEMCO, sp.dialect, "Content-Type %q", ct)
	}
	form := "multipart/form-data; boundary=b"
	seen, _, code, _ := throughAs(t, DialectEMCO, "POST", path, "", form, body)
	require.Equal(t, 299, code)
	require.Equal(t, body, seen, "a multipart body goes on as it was")
}

func TestDialectRefusals(t *testing.T) {
	t.Parallel()
	base := "/v2/projects/p/logical-clouds"
	for body, field := range map[string]string{
		`{"spec":{"clusterProvider":"p","cluster":"c","certificate":"LS0t"}}`: "spec.certificate",
		`{"spec":{"clusterProvider":"p","cluster":"c","owner":"x"}}`:          "spec.owner",
		`{"spec":"p/c"}`: "spec",
		`{"clusterProvider":"p","cluster-provider":"q","cluster-name":"c"}`: "cluster-provider",
	} {
		_, _, code, answer := through(t, DialectDCM, "POST", base+"/lc/cluster-references", "", body)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, answer, `"field":"`+field+`"`, body)
	}
	for body, field := range map[string]string{
		`{"metadata":{"name":"a"},"permission-name":"b","spec":{}}`: "metadata.name",
		`{"metadata":{"name":"a"},"spec":{"rules":[]}}`:             "spec.rules",
	} {
		_, _, code, answer := through(t, DialectDCM, "POST", base+"/lc/user-permissions", "", body)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, answer, `"field":"`+field+`"`, body)
	}
	_, _, code, answer := through(t, DialectDCM, "POST", base, "", `{"metadata":{"name":"lc"},"spec":{"labels":{"geo":1}}}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, answer, `"field":"spec.labels.geo"`)
	_, _, code, answer = through(t, DialectDCM, "POST", base, "", `{"metadata":{"name":"lc"},"spec":{"user":{"userName":"a","user-name":"b"}}}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, answer, `"field":"spec.user.user-name"`)
}

func TestEMCOFieldNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "metadata.name", emcoField(kindPermission, "permission-name"))
	require.Equal(t, "spec.apiGroups[0]", emcoField(kindPermission, "apiGroups[0]"))
	require.Equal(t, "spec.loadBalancerIP", emcoField(kindReference, "loadbalancer-ip"))
	require.Equal(t, "spec.user.userName", emcoField(kindLogicalCloud, "spec.user.user-name"))
	require.Equal(t, "metadata.name", emcoField(kindReference, "metadata.name"), "the same in both")
}

// bodyOf stands in for grpc-gateway's wrapper of an answer whose route
// has a response_body: the message, and the field it answers.
type bodyOf struct {
	proto.Message
	body any
}

func (b bodyOf) XXX_ResponseBody() any { return b.body }

// TestAnswersInEMCOShapes: the answers' messages as EMCO writes them, and
// untouched in the project's dialect.
func TestAnswersInEMCOShapes(t *testing.T) {
	t.Parallel()
	emco := context.WithValue(context.Background(), dialectKey{}, &spoken{dialect: DialectEMCO})
	lc := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: "lc1", Description: "d", UserData1: "a"},
		Spec: &corev1.LogicalCloudSpec{Namespace: "ns1", Level: "standard", PodSecurity: "baseline",
			Labels: []*typesv1.Label{{Key: "geo", Value: "eu"}},
			User:   &corev1.LogicalCloudUser{UserName: "user-1", Type: "certificate"}}}
	admin := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: "default"}, Spec: &corev1.LogicalCloudSpec{Level: "admin"}}
	ref := &corev1.ClusterReference{ClusterProvider: "provider1", ClusterName: "cluster1", LoadbalancerIp: "0.0.0.0",
		Metadata: &typesv1.Metadata{Name: "cluster1-ref"}}
	perm := &userv1.UserPermission{PermissionName: "p1", Namespace: "ns1", ApiGroups: []string{""}, Resources: []string{"pods"},
		Verbs: []string{"get"}, Metadata: &typesv1.Metadata{Name: "p1", UserData2: "x"}}
	for _, c := range []struct {
		resp proto.Message
		want string
	}{
		{&corev1.CreateLogicalCloudResponse{Name: "lc1", LogicalCloud: lc},
			`{"metadata":{"name":"lc1","description":"d","userData1":"a","userData2":""},"spec":{"namespace":"ns1","level":"1","labels":{"geo":"eu"},"user":{"userName":"user-1","type":"certificate"}}}`},
		{&corev1.ListClusterReferencesResponse{},
			`[]`},
		{&corev1.ListClusterReferencesResponse{ClusterReferences: []*corev1.ClusterReference{ref}},
			`[{"metadata":{"name":"cluster1-ref","description":"","userData1":"","userData2":""},"spec":{"clusterProvider":"provider1","cluster":"cluster1","loadBalancerIP":"0.0.0.0","certificate":""}}]`},
		{bodyOf{&corev1.ListLogicalCloudsResponse{}, []*corev1.LogicalCloud{admin}},
			`[{"metadata":{"name":"default","description":"","userData1":"","userData2":""},"spec":{"namespace":"","level":"0","labels":null,"user":{"userName":"","type":""}}}]`},
		{bodyOf{&userv1.GetUserPermissionResponse{}, perm},
			`{"metadata":{"name":"p1","description":"","userData1":"","userData2":"x"},"spec":{"namespace":"ns1","apiGroups":[""],"resources":["pods"],"verbs":["get"]}}`},
	} {
		got, err := inEMCO(emco, c.resp)
		require.NoError(t, err)
		b, err := json.Marshal(got)
		require.NoError(t, err)
		require.JSONEq(t, c.want, string(b))
	}
	same, err := inEMCO(context.Background(), lc)
	require.NoError(t, err)
	require.Same(t, lc, same, "the project's dialect is answered as it is")
}
