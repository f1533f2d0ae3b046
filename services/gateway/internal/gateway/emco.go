package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
)

// EMCO's DCM API is a dialect of the REST API (docs/emco.md): its request
// bodies are rewritten here into the project's shapes before grpc-gateway
// decodes them, and its answers are written from the same messages in
// EMCO's shapes. The services see one representation.

// Dialects, as the Dcm-Dialect header and DCM_GATEWAY_DIALECT name them.
const (
	DialectDCM  = "dcm"
	DialectEMCO = "emco"
	// DialectHeader names the dialect of the answer: sent by a client, it
	// chooses; the gateway answers it with the dialect it used.
	DialectHeader = "Dcm-Dialect"
)

// CheckDialect refuses a DCM_GATEWAY_DIALECT the gateway does not speak.
func CheckDialect(d string) error {
	if d != DialectDCM && d != DialectEMCO {
		return fmt.Errorf("DCM_GATEWAY_DIALECT: %q is not a dialect: dcm or emco", d)
	}
	return nil
}

// A request's body kinds whose shapes differ between the dialects.
const (
	kindLogicalCloud = "logical cloud"
	kindReference    = "cluster reference"
	kindPermission   = "user permission"
)

// dialectKey holds a request's dialect in its context.
type dialectKey struct{}

// spoken is the dialect a request is answered in and the kind of body it
// sent, if one of dialectRoutes'. chosen is a Dcm-Dialect header's choice,
// which the body's spellings do not override.
type spoken struct {
	dialect, kind string
	chosen        bool
	// body is the message the request's body decodes into, if any:
	// EMCO's dialect reads its keys as EMCO would (emcokeys.go).
	body protoreflect.MessageDescriptor
	// status is EMCO's status query, on the status route in EMCO's
	// dialect (emco_status.go).
	status *emcoStatusQuery
}

func dialectOf(ctx context.Context) spoken {
	if s, _ := ctx.Value(dialectKey{}).(*spoken); s != nil {
		return *s
	}
	return spoken{}
}

// dialects chooses each request's dialect from the Dcm-Dialect header,
// else def, notes which of dialectRoutes' bodies it sends, and says the
// dialect in the answer's Dcm-Dialect header. It reads no body: readBody,
// after the route's authorization, rewrites an EMCO body into the
// project's shape (and answers EMCO when the body used its spellings).
func dialects(def string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sp := &spoken{dialect: def}
		if h := r.Header.Get(DialectHeader); h != "" {
			switch d := strings.ToLower(strings.TrimSpace(h)); d {
			case DialectDCM, DialectEMCO:
				sp.dialect, sp.chosen = d, true
			default:
				errs.WriteHTTP(w, errs.ToStatus(errs.Invalid(DialectHeader, "%q is not a dialect: dcm or emco", h)))
				return
			}
		}
		for _, rt := range dialectRoutes {
			if _, ok := matchTemplate(rt.template, r.URL.Path, true); ok && r.Method == rt.method {
				sp.kind = rt.kind
				break
			}
		}
		sp.body = bodyMessage(r.Method, r.URL.Path)
		w.Header().Set(DialectHeader, sp.dialect)
		// EMCO's status parameters are read for a caller the route serves
		// only: anyone else gets the route's 403, whatever they hold.
		if vars, ok := matchTemplate(statusRoute, r.URL.Path, true); ok && r.Method == http.MethodGet && sp.dialect == DialectEMCO &&
			Authorize(auditOf(r.Context()).id, r.Method, routeOf(statusRoute, vars)) {
			q, err := parseEMCOStatus(r.URL.RawQuery)
			if err != nil {
				errs.WriteHTTP(w, errs.ToStatus(err))
				return
			}
			sp.status = q
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), dialectKey{}, sp)))
	})
}

// readBody is the router's middleware after authorized: the first to read
// a request's body, once the caller is authenticated (secure) and the
// route it matched allows it (authorized); nothing of a body is read for
// anyone else. It reads the body whole (platform/server bounds it by
// DCM_MAX_BODY_BYTES: past it, 413), so a decoder that stops after the
// first JSON value never serves a request with more behind it, and
// rewrites an EMCO body into the project's shape (dialects).
func readBody(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if r.Body == nil || r.Body == http.NoBody {
			next(w, r, params)
			return
		}
		raw, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if server.TooLarge(w, err) {
			return
		}
		if err != nil {
			errs.WriteHTTP(w, errs.ToStatus(errs.Invalid("body", "reading the request body failed: %v", err)))
			return
		}
		putBody(r, raw)
		if sp, _ := r.Context().Value(dialectKey{}).(*spoken); sp != nil && (sp.kind != "" || sp.dialect == DialectEMCO && sp.body != nil) && isJSON(r) {
			emco, ignored, err := rewriteBody(r, raw, sp)
			if err != nil {
				errs.WriteHTTP(w, errs.ToStatus(err))
				return
			}
			if len(ignored) > 0 {
				w.Header().Set(IgnoredHeader, strings.Join(ignored, ", "))
			}
			if emco && !sp.chosen {
				sp.dialect = DialectEMCO
				w.Header().Set(DialectHeader, sp.dialect)
			}
		}
		next(w, r, params)
	}
}

// putBody makes b r's body.
func putBody(r *http.Request, b []byte) {
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	r.Header.Set("Content-Length", strconv.Itoa(len(b)))
}

// isJSON reports whether r carries a body the router decodes as JSON:
// every body whatever its Content-Type (the marshaler is registered for
// runtime.MIMEWildcard), as EMCO decodes its bodies with encoding/json
// without reading the header (src/dcm/api/logicalCloudHandler.go) and
// curl -d, used in EMCO's docs, sends application/x-www-form-urlencoded.
// A multipart form is not: multipartClusters turns it into JSON on the
// clusters' routes, and every other route's decoder refuses it.
func isJSON(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err != nil || !strings.HasPrefix(mt, "multipart/")
}

// rewriteBody puts raw, r's body, back in the project's shape if it is a
// JSON object. It reports whether the body used EMCO's spellings. A body
// that is not a JSON object stays as it was, for the decoder to refuse.
// In EMCO's dialect the keys are read as EMCO reads them (emcokeys.go):
// it answers the paths of the keys ignored, sorted.
func rewriteBody(r *http.Request, raw []byte, sp *spoken) (bool, []string, error) {
	put := func(b []byte) { putBody(r, b) }
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var body map[string]any
	if err := d.Decode(&body); err != nil || body == nil {
		put(raw)
		return false, nil, nil
	}
	before, err := json.Marshal(body)
	if err != nil {
		return false, nil, errs.Invalid("body", "%v", err)
	}
	kind, folding := sp.kind, sp.dialect == DialectEMCO
	var ignored []string
	if s := emcoShapes[kind]; folding && s != nil {
		if ignored, err = foldShape(body, s, ""); err != nil {
			return false, nil, err
		}
	}
	var emco bool
	switch kind {
	case kindLogicalCloud:
		emco, err = logicalCloudToDCM(body)
	case kindReference:
		emco, err = referenceToDCM(body)
	case kindPermission:
		emco, err = permissionToDCM("", body)
	}
	if err != nil {
		return false, nil, err
	}
	if folding && sp.body != nil {
		got, err := foldMessage(body, sp.body, "")
		if err != nil {
			return false, nil, err
		}
		for _, p := range got {
			ignored = append(ignored, emcoField(kind, p))
		}
	}
	sort.Strings(ignored)
	b, err := json.Marshal(body)
	if err != nil {
		return false, nil, errs.Invalid("body", "%v", err)
	}
	if bytes.Equal(b, before) {
		// Nothing to rewrite: the body goes on byte for byte, for the
		// decoder to judge as sent (a key given twice, say).
		b = raw
	}
	put(b)
	return emco, ignored, nil
}

// renameKey moves obj[from] to obj[to]; both given is a mistake.
func renameKey(obj map[string]any, from, to, path string) (bool, error) {
	v, ok := obj[from]
	if !ok {
		return false, nil
	}
	if _, both := obj[to]; both {
		return false, errs.Invalid(path+to, "is given twice, as %q and %q: give one", from, to)
	}
	delete(obj, from)
	obj[to] = v
	return true, nil
}

// logicalCloudToDCM rewrites a logical cloud body: spec.user's userName
// and userPermissions (each permission in either shape), and spec.labels
// as an object (either dialect) into the list of key and value; a null
// labels is none.
func logicalCloudToDCM(body map[string]any) (bool, error) {
	spec, ok := body["spec"].(map[string]any)
	if !ok {
		return false, nil
	}
	emco := false
	if user, ok := spec["user"].(map[string]any); ok {
		for _, k := range [][2]string{{"userName", "user-name"}, {"userPermissions", "user-permissions"}} {
			moved, err := renameKey(user, k[0], k[1], "spec.user.")
			if err != nil {
				return false, err
			}
			emco = emco || moved
		}
		if perms, ok := user["user-permissions"].([]any); ok {
			for i, p := range perms {
				if obj, ok := p.(map[string]any); ok {
					moved, err := permissionToDCM(fmt.Sprintf("spec.user.user-permissions[%d].", i), obj)
					if err != nil {
						return false, err
					}
					emco = emco || moved
				}
			}
		}
	}
	switch labels := spec["labels"].(type) {
	case nil:
		delete(spec, "labels")
	case map[string]any:
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		list := make([]any, 0, len(keys))
		for _, k := range keys {
			v, ok := labels[k].(string)
			if !ok {
				return false, errs.Invalid("spec.labels."+k, "a label value is a string")
			}
			list = append(list, map[string]any{"key": k, "value": v})
		}
		spec["labels"] = list
	}
	return emco, nil
}

// referenceToDCM rewrites EMCO's cluster reference ({"metadata", "spec":
// {"clusterProvider", "cluster", "loadBalancerIP", "certificate"}}, also
// with the older kebab-case keys inside spec) into the project's flat
// body with metadata.
func referenceToDCM(body map[string]any) (bool, error) {
	emco := false
	for _, k := range [][2]string{{"clusterProvider", "cluster-provider"}, {"cluster", "cluster-name"}, {"loadBalancerIP", "loadbalancer-ip"}} {
		moved, err := renameKey(body, k[0], k[1], "")
		if err != nil {
			return false, err
		}
		emco = emco || moved
	}
	raw, has := body["spec"]
	if !has {
		return emco, nil
	}
	spec, ok := raw.(map[string]any)
	if !ok {
		return false, errs.Invalid("spec", "is an object: clusterProvider, cluster, loadBalancerIP")
	}
	delete(body, "spec")
	names := map[string]string{
		"clusterProvider": "cluster-provider", "cluster-provider": "cluster-provider",
		"cluster": "cluster-name", "cluster-name": "cluster-name",
		"loadBalancerIP": "loadbalancer-ip", "loadbalancer-ip": "loadbalancer-ip",
	}
	for _, k := range sortedKeys(spec) { // in order: the first unknown key is the one named
		v := spec[k]
		if k == "certificate" {
			// EMCO answers the user's certificate here once it has one;
			// a client sends back what it read. The certificate is the
			// system's: read it in .../kubeconfig.
			if s, ok := v.(string); !ok || s != "" {
				return false, errs.Invalid("spec.certificate", "is the user's certificate, issued on the cluster: it is not written (read it in .../kubeconfig)")
			}
			continue
		}
		to, ok := names[k]
		if !ok {
			return false, errs.Invalid("spec."+k, "unknown field: a cluster reference's spec is clusterProvider, cluster and loadBalancerIP")
		}
		if _, both := body[to]; both {
			return false, errs.Invalid("spec."+k, "is given twice")
		}
		body[to] = v
	}
	return true, nil
}

// permissionToDCM rewrites EMCO's user permission ({"metadata": {"name",
// ...}, "spec": {"namespace", "apiGroups", "resources", "verbs"}}) at
// path into the project's flat body: permission-name is metadata's name,
// metadata is kept for its description and user data.
func permissionToDCM(path string, body map[string]any) (bool, error) {
	raw, has := body["spec"]
	md, hasMD := body["metadata"].(map[string]any)
	if !has && !hasMD {
		return false, nil
	}
	if hasMD {
		if name, ok := md["name"]; ok {
			if _, both := body["permission-name"]; both {
				return false, errs.Invalid(path+"metadata.name", "is given twice, as metadata.name and permission-name: give one")
			}
			body["permission-name"] = name
		}
	}
	if has {
		spec, ok := raw.(map[string]any)
		if !ok {
			return false, errs.Invalid(path+"spec", "is an object: namespace, apiGroups, resources, verbs")
		}
		delete(body, "spec")
		for _, k := range sortedKeys(spec) {
			v := spec[k]
			switch k {
			case "namespace", "apiGroups", "resources", "verbs":
			default:
				return false, errs.Invalid(path+"spec."+k, "unknown field: a user permission's spec is namespace, apiGroups, resources and verbs")
			}
			if _, both := body[k]; both {
				return false, errs.Invalid(path+"spec."+k, "is given twice")
			}
			body[k] = v
		}
	}
	return true, nil
}

// emcoFields are the project's field names as EMCO's bodies spell them,
// per body kind, for the field an error names (longest prefix first).
var emcoFields = map[string][][2]string{
	kindPermission: {{"permission-name", "metadata.name"}, {"namespace", "spec.namespace"}, {"apiGroups", "spec.apiGroups"},
		{"resources", "spec.resources"}, {"verbs", "spec.verbs"}},
	kindReference:    {{"cluster-provider", "spec.clusterProvider"}, {"cluster-name", "spec.cluster"}, {"loadbalancer-ip", "spec.loadBalancerIP"}},
	kindLogicalCloud: {{"spec.user.user-name", "spec.user.userName"}, {"spec.user.user-permissions", "spec.user.userPermissions"}},
}

// emcoField is field as the EMCO body of kind names it.
func emcoField(kind, field string) string {
	for _, m := range emcoFields[kind] {
		if field == m[0] || strings.HasPrefix(field, m[0]+".") || strings.HasPrefix(field, m[0]+"[") {
			return m[1] + strings.TrimPrefix(field, m[0])
		}
	}
	return field
}

// The answers in EMCO's shapes.

type emcoMetadata struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	UserData1   string `json:"userData1"`
	UserData2   string `json:"userData2"`
}

func toEMCOMetadata(md *typesv1.Metadata) emcoMetadata {
	return emcoMetadata{Name: md.GetName(), Description: md.GetDescription(), UserData1: md.GetUserData1(), UserData2: md.GetUserData2()}
}

type emcoLogicalCloud struct {
	Metadata emcoMetadata `json:"metadata"`
	Spec     struct {
		Namespace string            `json:"namespace"`
		Level     string            `json:"level"`
		Labels    map[string]string `json:"labels"`
		User      struct {
			UserName string `json:"userName"`
			Type     string `json:"type"`
		} `json:"user"`
	} `json:"spec"`
}

// emcoLevels are the stored levels as EMCO writes them; privileged, which
// EMCO lacks, is answered as it is.
var emcoLevels = map[string]string{"admin": "0", "standard": "1"}

func toEMCOLogicalCloud(c *corev1.LogicalCloud) emcoLogicalCloud {
	var out emcoLogicalCloud
	out.Metadata = toEMCOMetadata(c.GetMetadata())
	spec := c.GetSpec()
	out.Spec.Namespace = spec.GetNamespace()
	out.Spec.Level = spec.GetLevel()
	if l, ok := emcoLevels[spec.GetLevel()]; ok {
		out.Spec.Level = l
	}
	if len(spec.GetLabels()) > 0 {
		out.Spec.Labels = map[string]string{}
		for _, l := range spec.GetLabels() {
			out.Spec.Labels[l.GetKey()] = l.GetValue()
		}
	}
	out.Spec.User.UserName, out.Spec.User.Type = spec.GetUser().GetUserName(), spec.GetUser().GetType()
	return out
}

type emcoReference struct {
	Metadata emcoMetadata `json:"metadata"`
	Spec     struct {
		ClusterProvider string `json:"clusterProvider"`
		Cluster         string `json:"cluster"`
		LoadBalancerIP  string `json:"loadBalancerIP"`
		// Certificate is EMCO's copy of the user's certificate; the
		// project keeps it with the user and answers it in .../kubeconfig
		// only, so it is empty here (docs/emco.md "Deviations").
		Certificate string `json:"certificate"`
	} `json:"spec"`
}

func toEMCOReference(r *corev1.ClusterReference) emcoReference {
	var out emcoReference
	out.Metadata = toEMCOMetadata(r.GetMetadata())
	out.Spec.ClusterProvider, out.Spec.Cluster, out.Spec.LoadBalancerIP = r.GetClusterProvider(), r.GetClusterName(), r.GetLoadbalancerIp()
	return out
}

type emcoPermission struct {
	Metadata emcoMetadata `json:"metadata"`
	Spec     struct {
		Namespace string   `json:"namespace"`
		APIGroups []string `json:"apiGroups"`
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	} `json:"spec"`
}

func toEMCOPermission(p *userv1.UserPermission) emcoPermission {
	var out emcoPermission
	out.Metadata = toEMCOMetadata(p.GetMetadata())
	out.Metadata.Name = p.GetPermissionName()
	out.Spec.Namespace, out.Spec.APIGroups, out.Spec.Resources, out.Spec.Verbs = p.GetNamespace(), p.GetApiGroups(), p.GetResources(), p.GetVerbs()
	return out
}

// emcoQuota is EMCO's cluster quota: metadata and the hard map as spec;
// a scoped quota's spec is Kubernetes' ResourceQuotaSpec ({hard, scopes,
// scopeSelector}), the form its body may take.
type emcoQuota struct {
	Metadata emcoMetadata   `json:"metadata"`
	Spec     map[string]any `json:"spec"`
}

func toEMCOQuota(q *quotav1.Quota) emcoQuota {
	out := emcoQuota{Metadata: toEMCOMetadata(q.GetMetadata()), Spec: q.GetSpec().AsMap()}
	if out.Spec == nil {
		out.Spec = map[string]any{}
	}
	if len(q.GetScopes()) == 0 && q.GetScopeSelector() == nil {
		return out
	}
	spec := map[string]any{"hard": out.Spec}
	if len(q.GetScopes()) > 0 {
		spec["scopes"] = q.GetScopes()
	}
	if sel := q.GetScopeSelector(); sel != nil {
		exprs := make([]map[string]any, 0, len(sel.GetMatchExpressions()))
		for _, e := range sel.GetMatchExpressions() {
			m := map[string]any{"scopeName": e.GetScopeName(), "operator": e.GetOperator()}
			if len(e.GetValues()) > 0 {
				m["values"] = e.GetValues()
			}
			exprs = append(exprs, m)
		}
		spec["scopeSelector"] = map[string]any{"matchExpressions": exprs}
	}
	out.Spec = spec
	return out
}

// each maps a list to EMCO's shapes (never null: EMCO answers []).
func each[M any, E any](in []M, f func(M) E) []E {
	out := make([]E, 0, len(in))
	for _, m := range in {
		out = append(out, f(m))
	}
	return out
}

// inEMCO is grpc-gateway's response rewriter: an answer to a request in
// EMCO's dialect, of a resource whose shape differs, in EMCO's shape; any
// other answer as it is.
func inEMCO(ctx context.Context, resp proto.Message) (any, error) {
	if dialectOf(ctx).dialect != DialectEMCO {
		return resp, nil
	}
	var body any = resp
	if rb, ok := resp.(interface{ XXX_ResponseBody() any }); ok {
		body = rb.XXX_ResponseBody()
	}
	switch b := body.(type) {
	case *corev1.LogicalCloudStatus:
		if q := dialectOf(ctx).status; q != nil {
			return q.answer(b)
		}
	case *corev1.LogicalCloud:
		return toEMCOLogicalCloud(b), nil
	case []*corev1.LogicalCloud:
		return each(b, toEMCOLogicalCloud), nil
	case *corev1.CreateLogicalCloudResponse:
		return toEMCOLogicalCloud(b.GetLogicalCloud()), nil
	case *corev1.ClusterReference:
		return toEMCOReference(b), nil
	case *corev1.ListClusterReferencesResponse:
		return each(b.GetClusterReferences(), toEMCOReference), nil
	case *userv1.UserPermission:
		return toEMCOPermission(b), nil
	case []*userv1.UserPermission:
		return each(b, toEMCOPermission), nil
	case *quotav1.Quota:
		return toEMCOQuota(b), nil
	case []*quotav1.Quota:
		return each(b, toEMCOQuota), nil
	}
	return resp, nil
}
