package core

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

// How users authenticate, as stored.
const (
	userCertificate = "certificate"
	userToken       = "token"
)

// Logical cloud levels, as stored.
const (
	levelStandard   = kube.LevelStandard
	levelAdmin      = kube.LevelAdmin
	levelPrivileged = kube.LevelPrivileged
)

// plan is everything a create request asks for, checked in full before
// anything is written: the logical cloud (as stored) and what the
// namespace, user and quota services will hold for it.
type plan struct {
	project string
	lc      *corev1.LogicalCloud
	users   []*userv1.User
	perms   []*userv1.UserPermission
	quotas  []*quotav1.Quota
	// quotaFields are where each quota was given in the body ("resources",
	// "user[0].quota"), to name in an error of the quota service.
	quotaFields []string
	labels      []string // seed 002 cluster-labels: clusters to reference
}

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	clusterLabel = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
)

func checkName(field, name string) error {
	if len(name) > 63 || !dnsLabel.MatchString(name) {
		return errs.Invalid(field, "%q must be a DNS-1123 label: 1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// planCreate reads either body shape into a plan, and checks it against
// what the caller may grant (g).
func planCreate(req *corev1.CreateLogicalCloudRequest, g grants) (*plan, error) {
	seed000 := req.GetMetadata() != nil || req.GetSpec() != nil
	seed002 := req.GetName() != "" || req.GetDescription() != "" || req.GetClusterLabels() != "" ||
		req.GetResources() != nil || req.GetUser() != nil
	switch {
	case seed000 && seed002:
		return nil, errs.Invalid("body", "use either metadata and spec, or the flat name, cluster-labels, resources and user, not both")
	case seed002:
		return planFlat(req, g)
	case req.GetMetadata() == nil:
		return nil, errs.Invalid("metadata", "is required (or give the flat body's name)")
	}
	return planSpec(req.GetProject(), req.GetMetadata(), req.GetSpec(), g)
}

// planSpec reads seed 000's body: metadata and spec with namespace, level
// and one user with permissions.
func planSpec(project string, md *typesv1.Metadata, spec *corev1.LogicalCloudSpec, g grants) (*plan, error) {
	name := md.GetName()
	level, err := parseLevel(spec.GetLevel())
	if err != nil {
		return nil, err
	}
	if level != levelStandard && !g.mayGrant {
		return nil, errs.Forbidden("spec.level", "only an admin may create a logical cloud at level %q", level)
	}
	if err := kube.CheckPodSecurity("spec.pod-security", level, spec.GetPodSecurity(), g.mayGrant); err != nil {
		return nil, err
	}
	if spec != nil && spec.FollowLabels != nil {
		if err := checkFollowLabels("spec.follow-labels", nil); err != nil {
			return nil, err
		}
	}
	if err := checkRollout("spec.rollout", spec.GetRollout()); err != nil { // rollout.go
		return nil, err
	}
	u := spec.GetUser()
	lc := &corev1.LogicalCloud{Metadata: md, Spec: &corev1.LogicalCloudSpec{Level: level, PodSecurity: cmp.Or(spec.GetPodSecurity(), g.PodSecurity)}}
	mesh, root, err := planMesh(spec, name, level, cmp.Or(spec.GetNamespace(), name), g.Reserved, meshNamespaceField)
	if err != nil {
		return nil, err
	}
	lc.Spec.ServiceMesh, lc.Spec.CaRoot, lc.Spec.Rollout = mesh, root, spec.GetRollout()
	if level == levelAdmin {
		if spec.GetPodSecurity() != "" {
			return nil, errs.Invalid("spec.pod-security", "an admin logical cloud has no namespace to enforce pod security in")
		}
		lc.Spec.PodSecurity = ""
		if spec.GetNamespace() != "" {
			return nil, errs.Invalid("spec.namespace", "an admin logical cloud uses the clusters' admin access: it has no namespace")
		}
		if u != nil && !proto.Equal(u, &corev1.LogicalCloudUser{}) {
			// An empty user object (EMCO sends {"userName": "", "type": ""})
			// is no user.
			return nil, errs.Invalid("spec.user", "an admin logical cloud uses the clusters' admin access: it has no user")
		}
		if len(spec.GetLabels()) > 0 {
			return nil, errs.Invalid("spec.labels", "an admin logical cloud has no namespace to label")
		}
		return &plan{project: project, lc: lc}, nil
	}
	if err := kube.CheckLabels("spec.labels", spec.GetLabels()); err != nil {
		return nil, err
	}
	lc.Spec.Labels = spec.GetLabels()
	lc.Spec.Namespace = cmp.Or(spec.GetNamespace(), name)
	if err := kube.CheckNamespace(cmp.Or(nsField(spec), "metadata.name"), lc.Spec.Namespace, name, g.Reserved); err != nil {
		return nil, err
	}
	userName := cmp.Or(u.GetUserName(), name)
	userType, err := parseUserType("spec.user.type", u.GetType())
	if err != nil {
		return nil, err
	}
	if err := checkUserCSR("spec.user.certificate", userType, u.GetCertificate(), project, name, userName); err != nil {
		return nil, err
	}
	lc.Spec.User = &corev1.LogicalCloudUser{UserName: userName, Type: userType}
	lc.Spec.Users = []string{userName}
	p := &plan{project: project, lc: lc, users: []*userv1.User{{Name: userName, Type: userType, Certificate: u.GetCertificate()}}}
	for i, perm := range u.GetUserPermissions() {
		// protovalidate has checked the name; the rule and namespace are ours.
		if err := addPermission(p, fmt.Sprintf("spec.user.user-permissions[%d]", i), perm, g); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// istioSystemSuffix makes a logical cloud's default Istio namespace,
// "<logical cloud>-istio-system" (the service mesh service's default too).
const istioSystemSuffix = "-istio-system"

// meshNamespaceField is spec.service-mesh.namespace, as seed 000's body
// names it.
const meshNamespaceField = "spec.service-mesh.namespace"

// planMesh checks spec.service-mesh and spec.ca-root of logical cloud name
// at level, whose own namespace is ns, and answers them as stored. An
// admin logical cloud has no namespace, so no control plane either (400).
// The Istio namespace is the logical cloud's own, never its workload
// namespace, nor one the cluster or the installation keeps; with a name
// longer than 49 characters the default "<name>-istio-system" is too long
// for a namespace and the body must name one. The root named must be one
// the project may use (its own or a shared one): CA distribution decides,
// at create and update (LogicalClouds.checkCARoot) and when it signs.
// Errors about the Istio namespace name field, as the body names it.
func planMesh(spec *corev1.LogicalCloudSpec, name, level, ns string, reserved []string, field string) (*corev1.ServiceMesh, string, error) {
	sm, root := spec.GetServiceMesh(), spec.GetCaRoot()
	if level == levelAdmin {
		if sm.GetEnabled() || sm.GetNamespace() != "" {
			return nil, "", errs.Invalid("spec.service-mesh", "an admin logical cloud uses the clusters' admin access and has no namespace: it has no service mesh")
		}
		if root != "" {
			return nil, "", errs.Invalid("spec.ca-root", "an admin logical cloud has no service mesh to sign for")
		}
		return nil, "", nil
	}
	if root != "" {
		if err := checkName("spec.ca-root", root); err != nil {
			return nil, "", err
		}
	}
	if sm == nil {
		return nil, root, nil
	}
	istioNS := sm.GetNamespace()
	if istioNS == "" {
		istioNS = name + istioSystemSuffix
		if len(istioNS) > 63 && sm.GetEnabled() {
			return nil, "", errs.Invalid(field, "is required for a logical cloud named with more than %d characters: %q is longer than a namespace name may be", 63-len(istioSystemSuffix), istioNS)
		}
	}
	if istioNS == ns {
		return nil, "", errs.Invalid(field, "%q is the logical cloud's own namespace: the control plane needs one of its own", istioNS)
	}
	if len(istioNS) <= 63 {
		if err := kube.CheckNamespace(field, istioNS, name, reserved); err != nil {
			return nil, "", err
		}
	}
	return &corev1.ServiceMesh{Enabled: sm.GetEnabled(), Namespace: sm.GetNamespace()}, root, nil
}

// nsField names the body's namespace field when it set one.
func nsField(spec *corev1.LogicalCloudSpec) string {
	if spec.GetNamespace() != "" {
		return "spec.namespace"
	}
	return ""
}

// addPermission checks a permission against the logical cloud's level and
// what the caller may grant (kube.CheckGrant), and adds it, its namespace
// resolved.
func addPermission(p *plan, field string, perm *userv1.UserPermission, g grants) error {
	if slices.ContainsFunc(p.perms, func(o *userv1.UserPermission) bool { return o.GetPermissionName() == perm.GetPermissionName() }) {
		return errs.Invalid(field+".permission-name", "%q is given twice", perm.GetPermissionName())
	}
	for i, u := range perm.GetUsers() {
		if !slices.ContainsFunc(p.users, func(o *userv1.User) bool { return o.GetName() == u }) {
			return errs.Invalid(fmt.Sprintf("%s.users[%d]", field, i), "the logical cloud has no user %q", u)
		}
	}
	ns, err := kube.CheckGrant(field, p.lc.GetSpec().GetLevel(), p.lc.GetSpec().GetNamespace(), kube.Grant{
		Namespace: perm.GetNamespace(), APIGroups: perm.GetApiGroups(), Resources: perm.GetResources(), Verbs: perm.GetVerbs(),
	}, g.mayGrant)
	if err != nil {
		return err
	}
	p.perms = append(p.perms, &userv1.UserPermission{
		PermissionName: perm.GetPermissionName(), Namespace: ns,
		ApiGroups: perm.GetApiGroups(), Resources: perm.GetResources(), Verbs: perm.GetVerbs(), Metadata: perm.GetMetadata(),
		Users: perm.GetUsers(),
	})
	return nil
}

func parseLevel(level string) (string, error) {
	switch level {
	case "", "1", levelStandard:
		return levelStandard, nil
	case "0", levelAdmin:
		return levelAdmin, nil
	case levelPrivileged:
		return levelPrivileged, nil
	}
	return "", errs.Invalid("spec.level", "%q is not a level: standard (1), admin (0) or privileged", level)
}

// parseUserType reads a user's type as the seeds spell it, in any case
// (seed 000 writes "certificate, Token, UNPW", seed 002 "certificate,
// APIKey, UNPW"): certificate and token are stored lower-case; the
// seeds' other kinds have no Kubernetes meaning DCM could give them and
// are refused naming why (docs/logical-clouds.md, "User types").
func parseUserType(field, t string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "", userCertificate:
		return userCertificate, nil
	case userToken:
		return userToken, nil
	case "unpw":
		return "", errs.Invalid(field, "%q (user name and password) is not supported: Kubernetes has no password authentication (removed in 1.19); use %q or %q", t, userCertificate, userToken)
	case "apikey":
		return "", errs.Invalid(field, "%q is not supported: Kubernetes has no API keys; a bearer token is %q (a ServiceAccount token), else %q", t, userToken, userCertificate)
	}
	return "", errs.Invalid(field, "%q is not supported: users authenticate with a %q (a client certificate) or a %q (a ServiceAccount token)", t, userCertificate, userToken)
}

// checkUserCSR checks a certificate signing request given for user of
// logical cloud lc of project: only certificate users have one, and its
// subject is the user's Kubernetes identity (kube.CheckCSR).
func checkUserCSR(field, userType, csr, project, lc, user string) error {
	if csr == "" {
		return nil
	}
	if userType != userCertificate {
		return errs.Invalid(field, "only a %q user has a certificate signing request", userCertificate)
	}
	return kube.CheckCSR(field, csr, project, lc, user)
}

// checkFollowLabels refuses follow-labels (field) for a logical cloud
// without cluster labels: there is nothing to follow.
func checkFollowLabels(field string, labels []string) error {
	if len(labels) == 0 {
		return errs.Invalid(field, "applies to a logical cloud with cluster-labels only (seed 002's flat body), and this one has none")
	}
	return nil
}

// planFlat reads seed 002's body: name, description, cluster-labels,
// resources (the logical cloud's quota) and user, one object or a list,
// each with type, certificate, permissions and quota.
func planFlat(req *corev1.CreateLogicalCloudRequest, g grants) (*plan, error) {
	name := req.GetName()
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	if err := kube.CheckNamespace("name", name, name, g.Reserved); err != nil {
		return nil, err
	}
	if len(req.GetDescription()) > 1024 {
		return nil, errs.Invalid("description", "is longer than 1024 characters")
	}
	lc := &corev1.LogicalCloud{
		Metadata: &typesv1.Metadata{Name: name, Description: req.GetDescription()},
		Spec:     &corev1.LogicalCloudSpec{Level: levelStandard, Namespace: name, PodSecurity: g.PodSecurity},
	}
	p := &plan{project: req.GetProject(), lc: lc}
	for l := range strings.SplitSeq(req.GetClusterLabels(), ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if len(l) > 63 || !clusterLabel.MatchString(l) {
			return nil, errs.Invalid("cluster-labels", "%q is not a cluster label", l)
		}
		p.labels = append(p.labels, l)
	}
	lc.Spec.ClusterLabels = p.labels
	if req.FollowLabels != nil {
		if err := checkFollowLabels("follow-labels", p.labels); err != nil {
			return nil, err
		}
		lc.Spec.FollowLabels = req.FollowLabels
	}
	if res := req.GetResources(); res != nil {
		if _, _, err := checkQuota("resources", res, g); err != nil {
			return nil, err
		}
		p.quotas = append(p.quotas, &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: "resources", Description: "the logical cloud's resources"},
			Spec:     res,
		})
		p.quotaFields = append(p.quotaFields, "resources")
	}
	users, field, err := userObjects(req.GetUser())
	if err != nil {
		return nil, err
	}
	var userHard [][]kube.Amount
	for i, u := range users {
		hard, err := addFlatUser(p, fmt.Sprintf("%s[%d]", field, i), u, g)
		if err != nil {
			return nil, err
		}
		if hard != nil {
			userHard = append(userHard, hard)
			// The users' quotas become one ResourceQuota, their sum,
			// which bounds the namespace: it is held to the maximum.
			if err := kube.CheckUsersTotal(fmt.Sprintf("%s[%d].quota", field, i), kube.SumHard(userHard), g.MaxQuota, g.mayGrant); err != nil {
				return nil, err
			}
		}
	}
	if len(p.users) == 0 {
		p.users = []*userv1.User{{Name: name, Type: "certificate"}}
	}
	lc.Spec.User = &corev1.LogicalCloudUser{UserName: p.users[0].GetName(), Type: p.users[0].GetType()}
	lc.Spec.Users = userNames(p.users)
	return p, nil
}

// userObjects accepts seed 002's "user" as one object or a list of them.
func userObjects(v *structpb.Value) ([]*structpb.Struct, string, error) {
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return nil, "user", nil
	case *structpb.Value_StructValue:
		return []*structpb.Struct{k.StructValue}, "user", nil
	case *structpb.Value_ListValue:
		out := make([]*structpb.Struct, 0, len(k.ListValue.GetValues()))
		for i, e := range k.ListValue.GetValues() {
			s := e.GetStructValue()
			if s == nil {
				return nil, "", errs.Invalid(fmt.Sprintf("user[%d]", i), "must be an object")
			}
			out = append(out, s)
		}
		return out, "user", nil
	}
	return nil, "", errs.Invalid("user", "must be an object or a list of objects")
}

// addFlatUser adds one seed 002 user: the user, its permissions (a
// permission named after the user, or "<user>-<i>" for a list, granted to
// that user only) and its quota (a quota named "<user>-quota" for that
// user, whose hard map it answers: Kubernetes cannot bound one user in a
// namespace, so the quota service sums the users' quotas into one
// ResourceQuota for the namespace).
func addFlatUser(p *plan, field string, u *structpb.Struct, g grants) ([]kube.Amount, error) {
	f := u.GetFields()
	for k := range f {
		if !slices.Contains([]string{"name", "type", "certificate", "permissions", "quota"}, k) {
			return nil, errs.Invalid(field+"."+k, "unknown field %q", k)
		}
	}
	name, err := stringField(field+".name", f["name"])
	if err != nil {
		return nil, err
	}
	if err := checkName(field+".name", name); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(p.users, func(o *userv1.User) bool { return o.GetName() == name }) {
		return nil, errs.Invalid(field+".name", "user %q is given twice", name)
	}
	typ, err := stringField(field+".type", f["type"])
	if err != nil {
		return nil, err
	}
	if typ, err = parseUserType(field+".type", typ); err != nil {
		return nil, err
	}
	cert, err := stringField(field+".certificate", f["certificate"])
	if err != nil {
		return nil, err
	}
	if err := checkUserCSR(field+".certificate", typ, cert, p.project, p.lc.GetMetadata().GetName(), name); err != nil {
		return nil, err
	}
	p.users = append(p.users, &userv1.User{Name: name, Type: typ, Certificate: cert})

	var rules []*structpb.Struct
	switch k := f["permissions"].GetKind().(type) {
	case nil, *structpb.Value_NullValue:
	case *structpb.Value_StructValue:
		rules = []*structpb.Struct{k.StructValue}
	case *structpb.Value_ListValue:
		for i, e := range k.ListValue.GetValues() {
			if e.GetStructValue() == nil {
				return nil, errs.Invalid(fmt.Sprintf("%s.permissions[%d]", field, i), "must be an object")
			}
			rules = append(rules, e.GetStructValue())
		}
	default:
		return nil, errs.Invalid(field+".permissions", "must be an object or a list of objects")
	}
	for i, r := range rules {
		pf, pname := field+".permissions", name
		if len(rules) > 1 || f["permissions"].GetListValue() != nil {
			pf, pname = fmt.Sprintf("%s[%d]", pf, i), fmt.Sprintf("%s-%d", name, i)
		}
		if err := checkName(field+".name", pname); err != nil {
			return nil, err
		}
		perm, err := flatRule(pf, pname, r)
		if err != nil {
			return nil, err
		}
		// The user's permissions are its own: bound to it alone, never
		// to the logical cloud's other users.
		perm.Users = []string{name}
		if err := addPermission(p, pf, perm, g); err != nil {
			return nil, err
		}
	}
	if q := f["quota"]; q != nil {
		hard := q.GetStructValue()
		if hard == nil {
			return nil, errs.Invalid(field+".quota", "must be an object of resource quantities")
		}
		amounts, sc, err := checkQuota(field+".quota", hard, g)
		if err != nil {
			return nil, err
		}
		if !sc.Empty() {
			return nil, errs.Invalid(field+".quota.scopes", "a user's quota is summed with the other users' into one ResourceQuota (%s), which has no scopes: give scoped quotas to the logical cloud (resources, or .../cluster-quotas)", kube.UsersTotalName)
		}
		qname := name + "-quota"
		if err := checkName(field+".name", qname); err != nil {
			return nil, err
		}
		p.quotas = append(p.quotas, &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: qname, Description: "quota of user " + name},
			Spec:     hard,
			User:     name,
		})
		p.quotaFields = append(p.quotaFields, field+".quota")
		return amounts, nil
	}
	return nil, nil
}

// checkQuota checks a quota, its hard map or Kubernetes' ResourceQuotaSpec
// with scopes (kube.ParseQuotaSpec), and that only an admin goes over the
// installation's maximum.
func checkQuota(field string, spec *structpb.Struct, g grants) ([]kube.Amount, kube.Scopes, error) {
	amounts, sc, _, err := kube.ParseQuotaSpec(field, spec)
	if err != nil {
		return nil, sc, err
	}
	return amounts, sc, kube.CheckMax(field, amounts, g.MaxQuota, g.mayGrant)
}

// flatRule reads seed 002's {"apiGroups", "resources", "verbs"}.
func flatRule(field, name string, r *structpb.Struct) (*userv1.UserPermission, error) {
	perm := &userv1.UserPermission{PermissionName: name}
	for k, v := range r.GetFields() {
		var dst *[]string
		switch k {
		case "apiGroups":
			dst = &perm.ApiGroups
		case "resources":
			dst = &perm.Resources
		case "verbs":
			dst = &perm.Verbs
		case "namespace":
			ns, err := stringField(field+".namespace", v)
			if err != nil {
				return nil, err
			}
			perm.Namespace = ns
			continue
		default:
			return nil, errs.Invalid(field+"."+k, "unknown field %q", k)
		}
		list := v.GetListValue()
		if list == nil {
			return nil, errs.Invalid(field+"."+k, "must be a list of strings")
		}
		for i, e := range list.GetValues() {
			s, ok := e.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, errs.Invalid(fmt.Sprintf("%s.%s[%d]", field, k, i), "must be a string")
			}
			*dst = append(*dst, s.StringValue)
		}
	}
	return perm, nil
}

func stringField(field string, v *structpb.Value) (string, error) {
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return "", nil
	case *structpb.Value_StringValue:
		return k.StringValue, nil
	}
	return "", errs.Invalid(field, "must be a string")
}
