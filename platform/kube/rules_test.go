package kube_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

func TestCheckGrant(t *testing.T) {
	t.Parallel()
	g := func(ns string, groups, resources, verbs []string) kube.Grant {
		return kube.Grant{Namespace: ns, APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	core, any := []string{""}, []string{"*"}
	rbac := []string{"rbac.authorization.k8s.io"}
	read, write, all := []string{"get", "list", "watch"}, []string{"create", "delete"}, []string{"*"}
	cases := []struct {
		name     string
		level    string
		grant    kube.Grant
		mayGrant bool
		code     codes.Code
		field    string
		says     string
		ns       string
	}{
		{"own namespace, configmaps", kube.LevelStandard, g("", core, []string{"configmaps"}, write), false, codes.OK, "", "", "ns"},
		{"read everything in the namespace", kube.LevelStandard, g("ns", any, any, read), false, codes.OK, "", "", "ns"},
		{"roles in the namespace, listed verbs", kube.LevelStandard, g("", rbac, []string{"roles", "rolebindings"}, write), false, codes.OK, "", "", "ns"},
		{"read its quota", kube.LevelStandard, g("", core, []string{"resourcequotas"}, read), false, codes.OK, "", "", "ns"},
		{"delete its quota", kube.LevelStandard, g("", core, []string{"pods", "resourcequotas"}, write), false, codes.InvalidArgument, "p.resources[1]", "may not change its resourcequotas", ""},
		{"patch its quota status", kube.LevelStandard, g("", any, []string{"resourcequotas/status"}, []string{"patch"}), false, codes.InvalidArgument, "p.resources[0]", "resourcequotas", ""},
		{"delete its namespace", kube.LevelStandard, g("", core, []string{"namespaces"}, []string{"delete"}), false, codes.InvalidArgument, "p.resources[0]", "namespaces", ""},
		{"limit ranges", kube.LevelStandard, g("", core, []string{"limitranges"}, all), false, codes.InvalidArgument, "p.resources[0]", "limitranges", ""},
		{"read its network policies", kube.LevelStandard, g("", []string{"networking.k8s.io"}, []string{"networkpolicies"}, read), false, codes.OK, "", "", "ns"},
		{"delete its network policies", kube.LevelStandard, g("", []string{"apps", "networking.k8s.io"}, []string{"deployments", "networkpolicies"}, write), false, codes.InvalidArgument, "p.resources[1]", "may not change network policies", ""},
		{"patch network policies of any group", kube.LevelStandard, g("", any, []string{"networkpolicies"}, []string{"patch"}), false, codes.InvalidArgument, "p.resources[0]", "networkpolicies", ""},
		{"write * of the networking group", kube.LevelStandard, g("", []string{"networking.k8s.io"}, any, all), false, codes.InvalidArgument, "p.resources[0]", "networkpolicies", ""},
		{"ingresses of the networking group", kube.LevelStandard, g("", []string{"networking.k8s.io"}, []string{"ingresses"}, write), false, codes.OK, "", "", "ns"},
		{"network policies at level privileged", kube.LevelPrivileged, g("ns", []string{"networking.k8s.io"}, []string{"networkpolicies"}, write), false, codes.OK, "", "", "ns"},
		{"write * in the core group", kube.LevelStandard, g("", core, any, write), false, codes.InvalidArgument, "p.resources[0]", "list the resources", ""},
		{"*/*/* at standard is namespace admin", kube.LevelStandard, g("", any, any, all), false, codes.OK, "", "", "ns"},
		{"*/*/* at standard, own namespace named", kube.LevelStandard, g("ns", any, any, all), false, codes.OK, "", "", "ns"},
		{"*/*/* at standard, another namespace", kube.LevelStandard, g("other", any, any, all), true, codes.InvalidArgument, "p.namespace", "namespace \"ns\" only", ""},
		{"* with more groups is not namespace admin", kube.LevelStandard, g("", []string{"*", ""}, any, all), false, codes.InvalidArgument, "p.verbs", "escalate and bind", ""},
		{"* verbs on * resources of every group", kube.LevelStandard, g("", any, []string{"*", "pods"}, all), false, codes.InvalidArgument, "p.verbs", "escalate and bind", ""},
		{"escalate", kube.LevelStandard, g("", rbac, []string{"roles"}, []string{"escalate"}), false, codes.InvalidArgument, "p.verbs[0]", `verb "escalate"`, ""},
		{"bind", kube.LevelStandard, g("", rbac, []string{"clusterroles"}, []string{"get", "bind"}), false, codes.InvalidArgument, "p.verbs[1]", `verb "bind"`, ""},
		{"impersonate", kube.LevelStandard, g("", core, []string{"serviceaccounts"}, []string{"impersonate"}), false, codes.InvalidArgument, "p.verbs[0]", "impersonate", ""},
		{"* on rbac", kube.LevelStandard, g("", rbac, []string{"roles"}, all), false, codes.InvalidArgument, "p.verbs", `verb "*" on rbac.authorization.k8s.io`, ""},
		{"nodes", kube.LevelStandard, g("", core, []string{"nodes"}, read), false, codes.InvalidArgument, "p.resources[0]", `"nodes" is not a tenant's`, ""},
		{"csr approval", kube.LevelStandard, g("", []string{"certificates.k8s.io"}, []string{"certificatesigningrequests/approval"}, []string{"update"}), false, codes.InvalidArgument, "p.resources[0]", "approval", ""},
		{"another namespace at standard", kube.LevelStandard, g("other", core, []string{"pods"}, read), true, codes.InvalidArgument, "p.namespace", "namespace \"ns\" only", ""},
		{"privileged, cluster-wide, project-admin", kube.LevelPrivileged, g("", any, any, all), false, codes.PermissionDenied, "p.namespace", "only an admin may grant a permission cluster-wide", ""},
		{"privileged, other namespace, project-admin", kube.LevelPrivileged, g("kube-system", core, []string{"secrets"}, read), false, codes.PermissionDenied, "p.namespace", `in namespace "kube-system"`, ""},
		{"privileged, own namespace, project-admin", kube.LevelPrivileged, g("ns", core, []string{"pods"}, read), false, codes.OK, "", "", "ns"},
		{"privileged, cluster-wide, admin", kube.LevelPrivileged, g("", any, any, all), true, codes.OK, "", "", ""},
		{"privileged may escalate", kube.LevelPrivileged, g("ns", rbac, []string{"roles"}, []string{"escalate", "bind"}), false, codes.OK, "", "", "ns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns, err := kube.CheckGrant("p", c.level, "ns", c.grant, c.mayGrant)
			require.Equal(t, c.code, errs.Code(err), "%v", err)
			if c.code == codes.OK {
				require.Equal(t, c.ns, ns)
				return
			}
			st := errs.ToStatus(err)
			require.Equal(t, c.field, errs.FieldOf(st))
			require.Contains(t, st.Message(), c.says)
		})
	}
}

func TestCheckNamespace(t *testing.T) {
	t.Parallel()
	for ns, ok := range map[string]bool{
		"team-a": true, "lc-istio-system": true, "monitoring": false, "kube-system": false, "kube-public": false,
		"kube-node-lease": false, "default": false, "cert-manager-system": false, "other-istio-system": false, "istio-system": false,
		"openshift-monitoring": false, "openshift-x": false, "openshift": true, "monitoring-2": true,
	} {
		err := kube.CheckNamespace("spec.namespace", ns, "lc", []string{"monitoring", "openshift-*"})
		require.Equal(t, ok, err == nil, "%s: %v", ns, err)
		if err != nil {
			require.Equal(t, "spec.namespace", errs.FieldOf(errs.ToStatus(err)))
		}
	}
}

func TestCheckPodSecurity(t *testing.T) {
	t.Parallel()
	require.NoError(t, kube.CheckPodSecurity("f", kube.LevelStandard, "", false))
	require.NoError(t, kube.CheckPodSecurity("f", kube.LevelStandard, "restricted", false))
	require.Equal(t, codes.InvalidArgument, errs.Code(kube.CheckPodSecurity("f", kube.LevelStandard, "privileged", true)))
	require.Equal(t, codes.PermissionDenied, errs.Code(kube.CheckPodSecurity("f", kube.LevelPrivileged, "privileged", false)))
	require.NoError(t, kube.CheckPodSecurity("f", kube.LevelPrivileged, "privileged", true))
	require.Equal(t, codes.InvalidArgument, errs.Code(kube.CheckPodSecurity("f", kube.LevelStandard, "loose", true)))
}

func TestMergeHardAndMax(t *testing.T) {
	t.Parallel()
	base, err := kube.ParseHardText("d", "cpu=8,memory=32Gi")
	require.NoError(t, err)
	hard, err := kube.ParseHardText("h", "cpu=2,pods=10")
	require.NoError(t, err)
	require.Equal(t, []kube.Amount{{"cpu", "2"}, {"memory", "32Gi"}, {"pods", "10"}}, kube.MergeHard(base, hard))
	require.Equal(t, base, kube.MergeHard(base, nil))
	maximum, err := kube.ParseHardText("m", "cpu=4,memory=16Gi")
	require.NoError(t, err)
	require.NoError(t, kube.CheckMax("spec", hard, maximum, false))
	err = kube.CheckMax("spec", base, maximum, false)
	require.Equal(t, codes.PermissionDenied, errs.Code(err))
	require.Equal(t, "spec.cpu", errs.FieldOf(errs.ToStatus(err)))
	require.NoError(t, kube.CheckMax("spec", base, maximum, true))
}

// TestCheckLabels: a logical cloud's namespace labels are Kubernetes
// labels, each key once, and never one of the system's: Pod Security,
// the project's own identity labels, Istio's injection switches.
func TestCheckLabels(t *testing.T) {
	t.Parallel()
	require.NoError(t, kube.CheckLabels("spec.labels", labels("geo", "eu", "example.com/team", "a-b_c.d", "perf", "")))
	for _, c := range []struct{ key, value, field string }{
		{"pod-security.kubernetes.io/enforce", "privileged", "spec.labels.pod-security.kubernetes.io/enforce"},
		{"kubernetes.io/metadata.name", "x", "spec.labels.kubernetes.io/metadata.name"},
		{"node-role.k8s.io/x", "x", "spec.labels.node-role.k8s.io/x"},
		{"dcm.io/logical-cloud", "other-tenant", "spec.labels.dcm.io/logical-cloud"},
		{"istio.io/rev", "other", "spec.labels.istio.io/rev"},
		{"istio-injection", "enabled", "spec.labels.istio-injection"},
		{"bad key!", "x", "spec.labels.bad key!"},
		{"geo", "not a value", "spec.labels.geo"},
	} {
		err := kube.CheckLabels("spec.labels", labels(c.key, c.value))
		require.Equal(t, codes.InvalidArgument, errs.Code(err), c.key)
		require.Equal(t, c.field, errs.FieldOf(errs.ToStatus(err)), c.key)
	}
	require.Error(t, kube.CheckLabels("spec.labels", labels("a", "1", "a", "2")), "a key given twice")
	require.NoError(t, kube.CheckLabels("spec.labels", labels("notkubernetes.io/x", "y")), "only the domain and its subdomains")
	var many []string
	for i := range kube.MaxLabels + 1 {
		many = append(many, fmt.Sprintf("k%d", i), "")
	}
	require.Error(t, kube.CheckLabels("spec.labels", labels(many...)))
}

// labels are key, value, key, value... as labels.
func labels(kv ...string) []*typesv1.Label {
	var out []*typesv1.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &typesv1.Label{Key: kv[i], Value: kv[i+1]})
	}
	return out
}
