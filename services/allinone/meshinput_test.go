package allinone_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// zoneAttack is issue 29's loadbalancer-ip: protovalidate's string.ip
// takes an IPv6 address with a zone, and the zone's text is free; this one
// closes the gateway chart's quotes and adds externalIPs to its Services.
const zoneAttack = "fe80::1%x\"\n  externalIPs: [\"203.0.113.7\"]\n  sessionAffinity: \"None"

// TestLoadBalancerIPZoneRefused: a project admin's loadbalancer-ip with an
// IPv6 zone is refused (400 naming loadbalancer-ip) on every path that
// sets it: create with the provider in the body or in the path, update in
// both URL spellings, and EMCO's dialect (spec.loadBalancerIP). Nothing is
// stored; plain addresses still are.
func TestLoadBalancerIPZoneRefused(t *testing.T) {
	e := startTenants(t, "pz")
	pa := e.ProjectAdmin("pz")
	cl := e.H.Clusters[0].Name
	base := "/v2/projects/pz/logical-clouds/"
	pa.Want(201, "POST", "/v2/projects/pz/logical-clouds", apitest.MeshBody("zl"))
	lc := base + "zl"
	attack, err := json.Marshal(zoneAttack)
	require.NoError(t, err)
	refused := func(method, path, body, field string) {
		t.Helper()
		b := pa.Want(400, method, path, body)
		require.Equal(t, field, decodeMap(t, b)["field"], "%s %s: %s", method, path, b)
	}
	for _, ip := range []string{string(attack), `"fe80::1%eth0"`, `"10.0.0.1%x"`} {
		refused("POST", lc+"/cluster-references",
			fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q,"loadbalancer-ip":%s}`, cl, ip), "loadbalancer-ip")
		refused("POST", lc+"/cluster-providers/edge/cluster-references",
			fmt.Sprintf(`{"cluster-name":%q,"loadbalancer-ip":%s}`, cl, ip), "loadbalancer-ip")
		refused("POST", lc+"/cluster-references",
			fmt.Sprintf(`{"metadata":{"name":"ref-z"},"spec":{"clusterProvider":"edge","cluster":%q,"loadBalancerIP":%s}}`, cl, ip), "spec.loadBalancerIP")
	}
	require.Contains(t, pa.Want(200, "GET", lc+"/cluster-references", ""), `"cluster-references":[]`, "nothing stored")

	pa.Want(201, "POST", lc+"/cluster-references", fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q,"loadbalancer-ip":"fe80::1"}`, cl))
	for _, path := range []string{lc + "/cluster-references/" + cl, lc + "/cluster-providers/edge/cluster-references/" + cl} {
		refused("PUT", path, fmt.Sprintf(`{"loadbalancer-ip":%s}`, attack), "loadbalancer-ip")
		refused("PUT", path, fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"loadBalancerIP":%s}}`, cl, attack), "spec.loadBalancerIP")
	}
	got := pa.Want(200, "GET", lc+"/cluster-references/"+cl, "")
	require.Contains(t, got, `"loadbalancer-ip":"fe80::1"`, "the stored address is unchanged")
	pa.Want(200, "PUT", lc+"/cluster-references/"+cl, `{"loadbalancer-ip":"2001:db8::7"}`)
}

// revisionOf is render.Revision's formula (the service mesh service's
// internal package): the logical cloud's name and 8 hex digits of
// sha256("<project>/<lc>").
func revisionOf(project, lc string) string {
	sum := sha256.Sum256([]byte(project + "/" + lc))
	return lc + "-" + hex.EncodeToString(sum[:])[:8]
}

// dcmWebhooks are the webhook configurations DCM applied on the cluster
// (dcm.io/owner set), by name, each webhook's namespace and object
// selectors.
type hookSel struct {
	config, name string
	ns, obj      *metav1.LabelSelector
}

func dcmWebhooks(t *testing.T, cs *kubernetes.Clientset) []hookSel {
	t.Helper()
	ctx := context.Background()
	var out []hookSel
	mw, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range mw.Items {
		if c.Annotations["dcm.io/owner"] == "" {
			continue
		}
		for _, h := range c.Webhooks {
			out = append(out, hookSel{c.Name, h.Name, h.NamespaceSelector, h.ObjectSelector})
		}
	}
	vw, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range vw.Items {
		if c.Annotations["dcm.io/owner"] == "" {
			continue
		}
		for _, h := range c.Webhooks {
			out = append(out, hookSel{c.Name, h.Name, h.NamespaceSelector, h.ObjectSelector})
		}
	}
	return out
}

// selects says whether selector sel (nil: everything) matches lbls.
func selects(t *testing.T, sel *metav1.LabelSelector, lbls map[string]string) bool {
	t.Helper()
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	return s.Matches(labels.Set(lbls))
}

// TestMeshTenantsOnOneCluster: issue 29's second finding. Two projects'
// mesh logical clouds of the same name on one real cluster:
//   - each gets its own revision (name + hash of project and name);
//   - the second with the default istio namespace is refused (409, the
//     namespace is taken) before anything of it is applied, and the 409
//     does not name the other project;
//   - with an istio namespace of its own it applies, and every webhook DCM
//     applied on the cluster selects namespaces by its logical cloud's DCM
//     labels: none selects another tenant's namespace or a namespace
//     outside DCM, whatever revision label it or its pods carry. The API
//     server shows it: a pod labelled with a revision in a namespace of no
//     logical cloud is created untouched, while in the logical cloud's own
//     namespace the injector is called (and fails: istiod does not run);
//   - a revision claimed on the cluster by someone else is refused (409)
//     before anything is applied.
func TestMeshTenantsOnOneCluster(t *testing.T) {
	e := startTenants(t, "ta", "tb", "tc")
	cl := e.H.Clusters[0]
	cs := adminOf(t, cl)
	ctx := context.Background()
	r := e.Admin
	mesh := func(project, lc, istioNS string) string {
		t.Helper()
		path := "/v2/projects/" + project + "/logical-clouds/" + lc
		sm := `{"enabled":true}`
		if istioNS != "" {
			sm = fmt.Sprintf(`{"enabled":true,"namespace":%q}`, istioNS)
		}
		r.Want(201, "POST", "/v2/projects/"+project+"/logical-clouds",
			fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"namespace":"%s-%s","service-mesh":%s}}`, lc, project, lc, sm))
		r.Want(201, "POST", path+"/cluster-references", fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q}`, cl.Name))
		return path
	}

	a := mesh("ta", "same", "")
	r.Want(202, "POST", a+"/apply", "")
	st := r.Settle(a, "Instantiated")
	require.Equal(t, st.Total, st.Ready, "%+v", st)
	revA := apitest.MeshRevision(t, r, "ta", "same")
	require.Equal(t, revisionOf("ta", "same"), revA)

	// The second with the default istio namespace: 409 before anything.
	pb := e.ProjectAdmin("tb")
	b := mesh("tb", "same", "")
	taken := pb.Want(409, "POST", b+"/apply", "")
	require.Equal(t, "OWNED_BY_OTHER", decodeMap(t, taken)["reason"], taken)
	require.Contains(t, taken, "same-istio-system")
	require.Contains(t, taken, "another project")
	require.NotContains(t, taken, `\"ta\"`, "the holder's project is not named to another tenant")
	require.Equal(t, "Created", r.Status(b).State)
	require.Empty(t, leftOn(t, cl, "tb", "same"), "nothing of tb's applied")
	r.Want(204, "DELETE", b, "")

	// With its own istio namespace: its own revision, applied.
	b = mesh("tb", "same", "tb-mesh")
	r.Want(202, "POST", b+"/apply", "")
	st = r.Settle(b, "Instantiated")
	require.Equal(t, st.Total, st.Ready, "%+v", st)
	revB := apitest.MeshRevision(t, r, "tb", "same")
	require.Equal(t, revisionOf("tb", "same"), revB)
	require.NotEqual(t, revA, revB)

	// Every DCM webhook: the DCM selector of its own logical cloud, and
	// no match outside it.
	owners := map[string]map[string]string{} // webhook configuration -> its logical cloud's labels
	nsA, err := cs.CoreV1().Namespaces().Get(ctx, "ta-same", metav1.GetOptions{})
	require.NoError(t, err)
	nsB, err := cs.CoreV1().Namespaces().Get(ctx, "tb-same", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, revA, nsA.Labels["istio.io/rev"])
	require.Equal(t, revB, nsB.Labels["istio.io/rev"])
	hooks := dcmWebhooks(t, cs)
	require.Len(t, hooks, 4, "an injector and a validator webhook per logical cloud: %+v", hooks)
	for _, h := range hooks {
		require.NotNil(t, h.ns, "%s/%s has a namespace selector", h.config, h.name)
		own := map[string]string{}
		for _, k := range []string{kube.ProjectLabel, kube.LogicalCloudLabel} {
			require.NotEmpty(t, h.ns.MatchLabels[k], "%s/%s selects by %s", h.config, h.name, k)
			own[k] = h.ns.MatchLabels[k]
		}
		owners[h.config] = own
		require.False(t, strings.HasPrefix(h.name, "rev.object."), "%s/%s selects pods by label alone", h.config, h.name)
		mine, other := nsA, nsB
		if own[kube.ProjectLabel] == "tb" {
			mine, other = nsB, nsA
		}
		require.True(t, selects(t, h.ns, mine.Labels), "%s/%s selects its own namespace %s", h.config, h.name, mine.Name)
		require.False(t, selects(t, h.ns, other.Labels), "%s/%s selects the other tenant's namespace %s", h.config, h.name, other.Name)
		for _, rev := range []string{revA, revB} {
			require.False(t, selects(t, h.ns, map[string]string{"istio.io/rev": rev}),
				"%s/%s selects a namespace of no logical cloud labelled with revision %s", h.config, h.name, rev)
		}
	}
	require.Len(t, owners, 4)

	// The API server agrees: a pod labelled with ta's revision in a
	// namespace of no logical cloud (which carries the revision label too)
	// is admitted untouched; no webhook was called.
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "outsider", Labels: map[string]string{"istio.io/rev": revA}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Labels: map[string]string{"istio.io/rev": revA}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}}}
	}
	// create makes the pod once the namespace's default ServiceAccount is
	// there (the controller manager makes it a moment after the namespace).
	create := func(ns string) (*corev1.Pod, error) {
		var p *corev1.Pod
		var err error
		apitest.Eventually(t, "the default ServiceAccount of "+ns, func() bool {
			p, err = cs.CoreV1().Pods(ns).Create(ctx, pod(ns), metav1.CreateOptions{})
			return err == nil || !strings.Contains(err.Error(), "serviceaccount")
		})
		return p, err
	}
	p, err := create("outsider")
	require.NoError(t, err, "no injector is called for a pod outside the logical clouds")
	require.Len(t, p.Spec.Containers, 1)
	require.Empty(t, p.Spec.InitContainers)
	require.NotContains(t, p.Annotations, "sidecar.istio.io/status")
	// In ta's own namespace the injector is called: istiod is not running,
	// and the webhook fails closed.
	_, err = create("ta-same")
	require.Error(t, err, "ta's injector is called in ta's namespace")
	require.Contains(t, err.Error(), "sidecar-injector.istio.io")

	// A revision claimed on the cluster by someone else: 409 before
	// anything of the logical cloud is applied (rsync alone would have
	// refused the claim and applied the rest).
	claim := "dcm.mesh.revision." + revisionOf("tc", "same")
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: claim}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c := mesh("tc", "same", "tc-mesh")
	held := r.Want(409, "POST", c+"/apply", "")
	require.Equal(t, "NOT_MANAGED", decodeMap(t, held)["reason"], held)
	require.Contains(t, held, claim)
	require.Equal(t, "Created", r.Status(c).State)
	require.Empty(t, leftOn(t, cl, "tc", "same"), "nothing of tc's applied")
	_, err = cs.CoreV1().Namespaces().Get(ctx, "tc-mesh", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "tc's istio namespace: %v", err)
	require.Len(t, dcmWebhooks(t, cs), 4, "no webhook of tc's")

	// A mesh recorded before revisions were derived keeps its revision (the
	// logical cloud's name). Should its revision be another tenant's, the
	// claim is that tenant's: 409 before anything is applied, and the
	// message does not name the other project. (The document is written as
	// an older program wrote it, with ta's revision.)
	meshStore, err := e.S.Env.Store.For("servicemesh")
	require.NoError(t, err)
	docs := store.NewRecords(meshStore, "service_meshes", "service mesh", func() *servicemeshv1.ServiceMesh { return &servicemeshv1.ServiceMesh{} })
	d := mesh("tc", "legacy", "tc-legacy-mesh")
	require.NoError(t, docs.Create(ctx, store.Key("tc", "legacy"), "tc",
		&servicemeshv1.ServiceMesh{Project: "tc", LogicalCloud: "legacy", Revision: revA, IstioNamespace: "tc-legacy-mesh"}))
	held = e.ProjectAdmin("tc").Want(409, "POST", d+"/apply", "")
	require.Equal(t, "OWNED_BY_OTHER", decodeMap(t, held)["reason"], held)
	require.Contains(t, held, "dcm.mesh.revision."+revA)
	require.Contains(t, held, "another project")
	require.NotContains(t, held, `\"ta\"`)
	require.Equal(t, "Created", r.Status(d).State)
	require.Empty(t, leftOn(t, cl, "tc", "legacy"), "nothing of tc's applied")
	require.Len(t, dcmWebhooks(t, cs), 4, "no webhook of tc's")
}
