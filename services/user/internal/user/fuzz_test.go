package user_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"buf.build/go/protovalidate"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// fuzzUsers reads users from the fuzz input, one a line,
// "name[:type[:csr]]": csr "ok" is a CSR for the user's identity, "other"
// one for another's, anything else the PEM text as given.
func fuzzUsers(project, lc, text string) []*userv1.User {
	var out []*userv1.User
	for _, line := range fuzzLines(text) {
		f := strings.SplitN(line, ":", 3)
		u := &userv1.User{Name: f[0]}
		if len(f) > 1 {
			u.Type = f[1]
		}
		if len(f) > 2 {
			u.Certificate = f[2]
			cn, group := kube.UserIdentity(project, lc, u.GetName())
			switch f[2] {
			case "ok":
			case "other":
				cn, group = kube.UserIdentity(project, lc, "someone-else")
			default:
				out = append(out, u)
				continue
			}
			if csr, _, err := kube.NewCSR(cn, group); err == nil { // no CSR for a name that is no UTF-8
				u.Certificate = string(csr)
			}
		}
		out = append(out, u)
	}
	return out
}

// coreStores says whether core stores a logical cloud of level with
// namespace ns: a level it resolved, a namespace that is a DNS-1123 label
// (none at level admin). The permissions a tenant adds take the namespace
// core holds, so the fuzz's core holds no other.
func coreStores(level, ns string) bool {
	switch level {
	case kube.LevelAdmin:
		return ns == ""
	case kube.LevelStandard, kube.LevelPrivileged:
		return len(validation.IsDNS1123Label(ns)) == 0
	}
	return false
}

// fuzzLines are the first three lines of text: a logical cloud of the
// fuzz has at most three users and three permissions.
func fuzzLines(text string) []string {
	l := strings.Split(text, "\n")
	return l[:min(3, len(l))]
}

// fuzzPerms reads permissions from the fuzz input, one a line,
// "name|namespace|apiGroups|resources|verbs", lists comma-separated.
func fuzzPerms(text string) []*userv1.UserPermission {
	var out []*userv1.UserPermission
	list := func(s string) []string { return strings.Split(s, ",") }
	for _, line := range fuzzLines(text) {
		f := append(strings.SplitN(line, "|", 5), "", "", "", "")
		out = append(out, &userv1.UserPermission{PermissionName: f[0], Namespace: f[1], ApiGroups: list(f[2]), Resources: list(f[3]), Verbs: list(f[4])})
	}
	return out
}

// FuzzRenderUsers stores users as core's CreateUser would and permissions
// as a project admin's CreateUserPermission would, on a logical cloud of
// the level and namespace the input gives, renders them as core asks, and
// removes them again; then renders the same users with the permissions
// an admin may grant (anywhere, cluster-wide) through the pure renderer.
// Requests the gRPC validation interceptor refuses are not sent, as in the
// program. The rule: no panic; errors a caller can act on; every manifest
// an object whose metadata, rules, subjects and CSR a Kubernetes API
// server accepts.
func FuzzRenderUsers(f *testing.F) {
	for _, s := range []struct{ project, lc, ns, level, users, perms string }{
		{"p", "lc", "ns-1", kube.LevelStandard, "user-1", "permission-1||stable.example.com|secrets,pods|get,watch,list,create\npermission-2|||configmaps|*"},
		{"proj1", "lc-1", "ns-1", kube.LevelStandard, "user-1:certificate:ok", "deployments||apps|deployments,deployments/scale|get,list,patch"},
		{"p", "lc", "ns-1", kube.LevelStandard, "alice:certificate:other\nbob:token", "pods|ns-1||pods|get"},
		{"p", "priv", "priv-ns", kube.LevelPrivileged, "u:token", "wide|||nodes|get,list\nother|elsewhere|apps|deployments|*"},
		{"p", "adm", "", kube.LevelAdmin, "u", "x|||pods|get"},
		{"p", "lc", "ns", kube.LevelStandard, "u:certificate:-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----", "esc|||roles|escalate,bind"},
	} {
		f.Add(s.project, s.lc, s.ns, s.level, s.users, s.perms)
	}
	core := factstest.New(f)
	svc := user.New(keep(core, storetest.Open(f), "user"), 24*time.Hour)
	v, err := protovalidate.New()
	require.NoError(f, err)
	ctx := context.Background()

	f.Fuzz(func(t *testing.T, project, lc, ns, level, usersText, permsText string) {
		if coreStores(level, ns) {
			core.Add(project, lc, level, ns)
			defer core.Remove(project, lc)
		}
		users, perms := fuzzUsers(project, lc, usersText), fuzzPerms(permsText)
		for _, u := range users {
			if req := (&userv1.CreateUserRequest{Project: project, LogicalCloud: lc, User: u}); sendable(v, req) {
				_, err := svc.CreateUser(ctx, req)
				wantClear(t, "CreateUser", err)
			}
		}
		for _, p := range perms {
			if req := (&userv1.CreateUserPermissionRequest{Project: project, LogicalCloud: lc, UserPermission: p}); sendable(v, req) {
				_, err := svc.CreateUserPermission(ctx, req)
				wantClear(t, "CreateUserPermission", err)
			}
		}
		defer func() {
			if req := (&userv1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc}); sendable(v, req) {
				_, err := svc.PurgeLogicalCloud(ctx, req)
				require.NoError(t, err)
			}
		}()
		render := &userv1.RenderUsersRequest{Project: project, LogicalCloud: lc, Namespace: ns, Level: level}
		if !sendable(v, render) {
			return
		}
		resp, err := svc.RenderUsers(ctx, render)
		if err != nil {
			wantClear(t, "RenderUsers", err)
			return
		}
		for _, m := range resp.GetManifests() {
			wantAccepted(t, m)
		}
		// What an admin may grant, rendered for the same logical cloud.
		var granted []*userv1.UserPermission
		for _, p := range fuzzPerms(permsText) {
			if !sendable(v, &userv1.CreateUserPermissionRequest{Project: project, LogicalCloud: lc, UserPermission: p}) {
				continue
			}
			got, err := kube.CheckGrant("user_permission", level, ns, kube.Grant{Namespace: p.GetNamespace(), APIGroups: p.GetApiGroups(),
				Resources: p.GetResources(), Verbs: p.GetVerbs()}, true)
			if err == nil {
				p.Namespace = got
				granted = append(granted, p)
			}
		}
		manifests, _ := user.Render(project, lc, ns, 24*time.Hour, users, granted)
		for _, m := range manifests {
			wantAccepted(t, m)
		}
	})
}

// wantClear fails unless err is nil or a status a caller can act on.
func wantClear(t *testing.T, call string, err error) {
	t.Helper()
	switch status.Code(err) {
	case codes.OK, codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.AlreadyExists, codes.PermissionDenied:
	default:
		t.Fatalf("%s: %v (%s)", call, err, status.Code(err))
	}
}

// wantAccepted fails unless manifest is an object of a kind the user
// service renders that a Kubernetes API server's validation accepts.
func wantAccepted(t *testing.T, manifest string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON([]byte(manifest)), "%s", manifest)
	var problems field.ErrorList
	meta := field.NewPath("metadata")
	switch obj.GetKind() {
	case "ServiceAccount":
		problems = apivalidation.ValidateObjectMetaAccessor(obj, true, apivalidation.NameIsDNSSubdomain, meta)
	case "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
		namespaced := !strings.HasPrefix(obj.GetKind(), "Cluster")
		problems = apivalidation.ValidateObjectMetaAccessor(obj, namespaced, pathSegmentName, meta)
		rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
		for _, r := range rules {
			for _, k := range []string{"apiGroups", "resources", "verbs"} {
				l, _, _ := unstructured.NestedStringSlice(r.(map[string]any), k)
				require.NotEmpty(t, l, "rule without %s: %s", k, manifest)
			}
		}
		ref, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name")
		subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		if strings.HasSuffix(obj.GetKind(), "Binding") {
			require.Empty(t, content.IsPathSegmentName(ref), "roleRef of %s", manifest)
		}
		for _, s := range subjects {
			require.NotEmpty(t, s.(map[string]any)["name"], "subject without a name: %s", manifest)
		}
	case "CertificateSigningRequest":
		problems = apivalidation.ValidateObjectMetaAccessor(obj, false, pathSegmentName, meta)
		req, _, _ := unstructured.NestedString(obj.Object, "spec", "request")
		der, err := base64.StdEncoding.DecodeString(req)
		require.NoError(t, err, "%s", manifest)
		block, _ := pem.Decode(der)
		require.NotNil(t, block, "spec.request is no PEM: %s", manifest)
		_, err = x509.ParseCertificateRequest(block.Bytes)
		require.NoError(t, err, "%s", manifest)
	default:
		t.Fatalf("a kind the user service does not render: %s", manifest)
	}
	require.Empty(t, problems, "a Kubernetes API server refuses %s", manifest)
}

// sendable says whether req reaches the service in the program: it goes
// over the wire (proto strings are UTF-8) and the validation interceptor
// lets it through.
func sendable(v protovalidate.Validator, req proto.Message) bool {
	_, err := proto.Marshal(req)
	return err == nil && v.Validate(req) == nil
}

// pathSegmentName is how the API server checks the names of RBAC objects
// and CSRs (a path segment); none of them is generated with a prefix.
func pathSegmentName(name string, _ bool) []string { return content.IsPathSegmentName(name) }
