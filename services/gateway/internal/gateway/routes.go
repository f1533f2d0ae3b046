package gateway

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/server"
)

// The layers before grpc-gateway's router (the EMCO dialect's bodies,
// EMCO's multipart cluster form) recognise their requests by the URLs the
// contracts bind (google.api.http in proto/), read from the registered
// descriptors when the package starts (platform/server.HTTPBindings):
// a URL is written once, in the proto.

// dialectBodies are the request bodies whose JSON differs between the
// dialects, by the message they decode into: every binding whose body is
// one of them is a dialect route of that kind (a logical cloud's create and
// update, a cluster reference's in both its URL spellings, a user
// permission's).
var dialectBodies = map[protoreflect.FullName]string{
	nameOf(&corev1.CreateLogicalCloudRequest{}):     kindLogicalCloud,
	nameOf(&corev1.UpdateLogicalCloudRequest{}):     kindLogicalCloud,
	nameOf(&corev1.CreateClusterReferenceRequest{}): kindReference,
	nameOf(&corev1.UpdateClusterReferenceRequest{}): kindReference,
	nameOf(&userv1.UserPermission{}):                kindPermission,
}

// clustersRPC takes EMCO's multipart cluster registration (multipart.go)
// on its POST binding, clusterRPC EMCO's multipart update (emcoctl's
// update) on its PUT binding.
// statusRPC answers EMCO's status query (emco_status.go) on its GET
// binding.
var (
	clustersRPC = "/" + string(rsyncv1.RsyncService_ServiceDesc.ServiceName) + "/CreateCluster"
	clusterRPC  = "/" + string(rsyncv1.RsyncService_ServiceDesc.ServiceName) + "/UpdateCluster"
	statusRPC   = "/" + string(corev1.LogicalCloudService_ServiceDesc.ServiceName) + "/GetLogicalCloudStatus"
)

func nameOf(m proto.Message) protoreflect.FullName { return m.ProtoReflect().Descriptor().FullName() }

// A dialectRoute is a binding whose body differs between the dialects.
type dialectRoute struct {
	method, kind string
	// template is the binding's URL ("/v2/projects/{project}/logical-clouds"),
	// matched with matchTemplate (one trailing slash allowed).
	template string
}

// dialectRoutes are the bindings whose bodies are dialectBodies';
// clustersRoute is clustersRPC's POST binding, clusterRoute clusterRPC's
// PUT binding, statusRoute statusRPC's GET binding. routesErr, if not nil,
// says why they could not be read: New refuses to start with it.
var dialectRoutes, clustersRoute, clusterRoute, statusRoute, routesErr = readRoutes()

func readRoutes() ([]dialectRoute, string, string, string, error) {
	bs, err := server.HTTPBindings()
	if err != nil {
		return nil, "", "", "", err
	}
	var out []dialectRoute
	clusters, cluster, status := "", "", ""
	for _, b := range bs {
		for _, want := range []struct {
			rpc, method string
			into        *string
		}{{clustersRPC, "POST", &clusters}, {clusterRPC, "PUT", &cluster}, {statusRPC, "GET", &status}} {
			if b.RPC == want.rpc && b.Method == want.method && *want.into == "" {
				if err := checkTemplate(b.Path); err != nil {
					return nil, "", "", "", fmt.Errorf("%s: %w", b.RPC, err)
				}
				*want.into = b.Path
			}
		}
		if b.Body == nil {
			continue
		}
		kind, ok := dialectBodies[b.Body.FullName()]
		if !ok {
			continue
		}
		if err := checkTemplate(b.Path); err != nil {
			return nil, "", "", "", fmt.Errorf("%s: %w", b.RPC, err)
		}
		out = append(out, dialectRoute{method: b.Method, kind: kind, template: b.Path})
	}
	for name, kind := range dialectBodies {
		if !hasKind(out, kind) {
			return nil, "", "", "", fmt.Errorf("no binding takes a %s body (%s): the EMCO dialect would rewrite none", kind, name)
		}
	}
	if clusters == "" {
		return nil, "", "", "", fmt.Errorf("%s has no POST binding: EMCO's multipart cluster form has no route", clustersRPC)
	}
	if cluster == "" {
		return nil, "", "", "", fmt.Errorf("%s has no PUT binding: EMCO's multipart cluster update has no route", clusterRPC)
	}
	if status == "" {
		return nil, "", "", "", fmt.Errorf("%s has no GET binding: EMCO's status query has no route", statusRPC)
	}
	return out, clusters, cluster, status, nil
}

func hasKind(rs []dialectRoute, kind string) bool {
	for _, r := range rs {
		if r.kind == kind {
			return true
		}
	}
	return false
}

// checkTemplate refuses a URL template matchTemplate does not read: one
// with ** or a multi-segment variable, a :verb, an empty segment. No
// contract has one; a layer that recognises such a route needs a look
// first.
func checkTemplate(tmpl string) error {
	if !strings.HasPrefix(tmpl, "/") {
		return fmt.Errorf("URL template %q: no leading /", tmpl)
	}
	for _, seg := range strings.Split(tmpl[1:], "/") {
		if v, ok := templateVar(seg); ok {
			if name, pat, _ := strings.Cut(v, "="); name == "" || (pat != "" && pat != "*") {
				return fmt.Errorf("URL template %q: segment %s is not {field} or {field=*}", tmpl, seg)
			}
			continue
		}
		if seg == "" || strings.ContainsAny(seg, "{}*:") {
			return fmt.Errorf("URL template %q: segment %q is not a literal or {field}", tmpl, seg)
		}
	}
	return nil
}

// templateVar is a {field} segment's inside.
func templateVar(seg string) (string, bool) {
	if len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
		return seg[1 : len(seg)-1], true
	}
	return "", false
}

// matchTemplate matches path against a template checkTemplate passed, as
// grpc-gateway does: each {field} one non-empty segment, the rest
// literally; with slash, one trailing slash more is the same path. It
// answers the variables by field name.
func matchTemplate(tmpl, path string, slash bool) (map[string]string, bool) {
	if slash && len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	want, got := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return nil, false
	}
	params := map[string]string{}
	for i, w := range want {
		if v, ok := templateVar(w); ok {
			if got[i] == "" {
				return nil, false
			}
			name, _, _ := strings.Cut(v, "=")
			params[name] = got[i]
		} else if w != got[i] {
			return nil, false
		}
	}
	return params, true
}

// A bodyRoute is a binding with a request body: the message it decodes
// into, whose keys the EMCO dialect reads as EMCO would (emcokeys.go).
type bodyRoute struct {
	method, template string
	body             protoreflect.MessageDescriptor
}

// bodyRoutes are every binding with a body whose URL matchTemplate reads
// (none if the bindings cannot be read: routesErr says why).
var bodyRoutes = readBodyRoutes()

func readBodyRoutes() []bodyRoute {
	bs, _ := server.HTTPBindings()
	var out []bodyRoute
	for _, b := range bs {
		if b.Body != nil && checkTemplate(b.Path) == nil {
			out = append(out, bodyRoute{method: b.Method, template: b.Path, body: b.Body})
		}
	}
	return out
}

// bodyMessage is the message r's body decodes into: of the bodyRoutes r
// matches, the one with the most literal segments (grpc-gateway's
// bindings never differ only in a variable), nil for none.
func bodyMessage(method, path string) protoreflect.MessageDescriptor {
	var best protoreflect.MessageDescriptor
	most := -1
	for _, rt := range bodyRoutes {
		if rt.method != method {
			continue
		}
		if _, ok := matchTemplate(rt.template, path, true); !ok {
			continue
		}
		lit := 0
		for _, seg := range strings.Split(rt.template, "/") {
			if _, v := templateVar(seg); !v {
				lit++
			}
		}
		if lit > most {
			best, most = rt.body, lit
		}
	}
	return best
}
