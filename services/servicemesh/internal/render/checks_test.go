package render

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kube"
)

func testInput() Input {
	return Input{
		Project: "p1", LogicalCloud: "lc1", IstioNamespace: "lc1-istio-system", Revision: "lc1",
		TrustDomain: "lc1.p1.dcm.local", Hub: "docker.io/istio", Tag: "1.31.0",
		Clusters: []Cluster{{Provider: "edge", Cluster: "c1", LoadBalancerIP: "192.0.2.10"}},
	}
}

// attack is issue 29's loadbalancer-ip: a valid string.ip (an IPv6 address
// with a zone) whose zone closes the chart's quotes.
const attack = "fe80::1%x\"\n  externalIPs: [\"203.0.113.7\"]\n  sessionAffinity: \"None"

// TestRenderRefusesZone: issue 29's attack. The address protovalidate's
// string.ip let through (an IPv6 zone of free text) is refused before any
// chart is rendered, as are other inputs that are not of their type.
func TestRenderRefusesZone(t *testing.T) {
	for name, edit := range map[string]func(*Input){
		"zone with manifest text": func(in *Input) { in.Clusters[0].LoadBalancerIP = attack },
		"plain zone":              func(in *Input) { in.Clusters[0].LoadBalancerIP = "fe80::1%eth0" },
		"not an address":          func(in *Input) { in.Clusters[0].LoadBalancerIP = "192.0.2.10 # x" },
		"hub with a newline":      func(in *Input) { in.Hub = "docker.io/istio\n  x: y" },
		"tag with a quote":        func(in *Input) { in.Tag = `1.31.0"` },
		"trust domain":            func(in *Input) { in.TrustDomain = "lc1.p1.dcm.local\nx" },
		"revision":                func(in *Input) { in.Revision = "LC1" },
	} {
		t.Run(name, func(t *testing.T) {
			in := testInput()
			edit(&in)
			out, err := Render(in)
			require.Error(t, err)
			require.Nil(t, out)
			if strings.Contains(name, "zone") {
				require.Contains(t, err.Error(), "zone")
			}
		})
	}
	// What the attack would have rendered: the chart prints the address
	// between quotes without escaping it, so a zone that closes the quote
	// writes fields of its own into the Service. With the input check out
	// of the way, the values check still refuses it...
	in := testInput()
	in.Clusters[0].LoadBalancerIP = attack
	rels := gatewayReleases(in, in.Clusters[0], "edge-c1")
	err := checkValues(rels[0].dir, rels[0].vals)
	require.ErrorContains(t, err, "service/loadBalancerIP")
	// ...and had it been rendered, the Service is refused.
	docs, err := renderChart(rels[0].dir, rels[0].name, in.IstioNamespace, rels[0].vals)
	require.NoError(t, err)
	var refused error
	for _, d := range docs {
		o, err := parseChartDoc(d)
		require.NoError(t, err)
		if o.str("kind") == "Service" {
			spec, _ := o["spec"].(map[string]any)
			require.Contains(t, spec, "externalIPs", "the unquoted value injected externalIPs")
			refused = checkChartObject(in, in.Clusters[0], rels[0], o)
		}
	}
	require.ErrorContains(t, refused, "externalIPs")
}

// TestValuesAllowList: every string value DCM hands a chart is at a known
// path and of its type; an unknown path or a value not of its type is
// refused.
func TestValuesAllowList(t *testing.T) {
	in := testInput()
	c := in.Clusters[0]
	id := kube.MeshClusterID(c.Provider, c.Cluster)
	rels := append([]release{{discoveryChart, "istiod-lc1", istiodValues(in, id, meshNetworks(in.Clusters))}}, gatewayReleases(in, c, id)...)
	for _, r := range rels {
		require.NoError(t, checkValues(r.dir, r.vals), r.name)
	}
	for name, tc := range map[string]struct {
		chart string
		vals  map[string]any
		want  string
	}{
		"unknown path":       {gatewayChart, map[string]any{"service": map[string]any{"externalIPs": []any{"203.0.113.7"}}}, "service/externalIPs/#"},
		"newline in a label": {gatewayChart, map[string]any{"labels": map[string]any{"app": "x\ny: z"}}, "labels/app"},
		"bad annotation":     {gatewayChart, map[string]any{"service": map[string]any{"annotations": map[string]any{SharedIPAnnotation: "x\"y"}}}, "annotations"},
		"bad key":            {gatewayChart, map[string]any{"labels": map[string]any{"a\nb": "c"}}, "key"},
		"zone in meshNetworks": {discoveryChart, map[string]any{"global": map[string]any{"meshNetworks": map[string]any{"n": map[string]any{
			"gateways": []any{map[string]any{"address": "fe80::1%x"}}}}}}, "address"},
		"env value": {discoveryChart, map[string]any{"env": map[string]any{"X": "1; rm"}}, "env/X"},
		"nil value": {discoveryChart, map[string]any{"revision": nil}, "revision"},
		"no chart":  {"charts/other", map[string]any{}, "no value types"},
	} {
		err := checkValues(tc.chart, tc.vals)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// TestChartDocStrict: a rendered document is one object, without
// duplicate keys or a second document.
func TestChartDocStrict(t *testing.T) {
	_, err := parseChartDoc("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: n\n")
	require.NoError(t, err)
	for name, doc := range map[string]string{
		"duplicate key":        "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\nspec:\n  type: ClusterIP\n  type: LoadBalancer\n",
		"second document":      "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n--- \napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n",
		"document end, more":   "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n...\n--- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n",
		"a list":               "- apiVersion: v1\n  kind: ServiceAccount\n",
		"not an object":        "just text\n",
		"no name":              "apiVersion: v1\nkind: ServiceAccount\nmetadata: {}\n",
		"flow map then more":   "{apiVersion: v1, kind: ServiceAccount, metadata: {name: a}}\n{x: 1}\n",
		"duplicate nested key": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  name: b\n",
	} {
		_, err := parseChartDoc(doc)
		require.Error(t, err, name)
	}
}

// TestChartObjectChecks: what a chart could be steered into is refused:
// kinds it is not expected to render, other namespaces and names,
// externalIPs, another loadBalancerIP, host access, foreign images,
// webhooks calling elsewhere or selecting other namespaces.
func TestChartObjectChecks(t *testing.T) {
	in := testInput()
	c := in.Clusters[0]
	gw := release{gatewayChart, EastWestGateway, nil}
	istiod := release{discoveryChart, "istiod-lc1", nil}
	obj := func(j string) object {
		var o object
		require.NoError(t, json.Unmarshal([]byte(j), &o))
		return o
	}
	svc := func(spec string) object {
		return obj(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"istio-eastwestgateway","namespace":"lc1-istio-system"},"spec":` + spec + `}`)
	}
	require.NoError(t, checkChartObject(in, c, gw, svc(`{"type":"LoadBalancer","loadBalancerIP":"192.0.2.10"}`)))
	sel := `"namespaceSelector":{"matchLabels":{"dcm.io/project":"p1","dcm.io/logical-cloud":"lc1"}}`
	okHook := `{"name":"rev.namespace.x","clientConfig":{"service":{"name":"istiod-lc1","namespace":"lc1-istio-system"}},` + sel + `}`
	hooks := func(h string) object {
		return obj(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"istio-sidecar-injector-lc1-lc1-istio-system"},"webhooks":[` + h + `]}`)
	}
	require.NoError(t, checkChartObject(in, c, istiod, hooks(okHook)))
	deploy := func(pod string) object {
		return obj(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"istio-eastwestgateway","namespace":"lc1-istio-system"},"spec":{"template":{"spec":` + pod + `}}}`)
	}
	require.NoError(t, checkChartObject(in, c, gw, deploy(`{"containers":[{"name":"istio-proxy","image":"auto"}]}`)))

	for name, tc := range map[string]struct {
		r    release
		o    object
		want string
	}{
		"externalIPs":                   {gw, svc(`{"type":"LoadBalancer","externalIPs":["203.0.113.7"]}`), "externalIPs"},
		"other loadBalancerIP":          {gw, svc(`{"type":"LoadBalancer","loadBalancerIP":"203.0.113.7"}`), "loadBalancerIP"},
		"externalName":                  {gw, svc(`{"type":"ExternalName","externalName":"x.example"}`), "externalName"},
		"NodePort":                      {gw, svc(`{"type":"NodePort"}`), "type"},
		"unknown kind":                  {gw, obj(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"istio-eastwestgateway","namespace":"lc1-istio-system"}}`), "not expected"},
		"cluster kind in gateway":       {gw, obj(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"istio-eastwestgateway"}}`), "not expected"},
		"other namespace":               {gw, obj(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"istio-eastwestgateway","namespace":"kube-system"}}`), "namespace"},
		"other name":                    {gw, obj(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"coredns","namespace":"lc1-istio-system"}}`), "release"},
		"cluster name without revision": {istiod, obj(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"cluster-admin"}}`), "revision"},
		"default validator":             {istiod, obj(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"istiod-default-validator"}}`), "istiod-default-validator"},
		"binding elsewhere":             {istiod, obj(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"x-lc1-lc1-istio-system"},"subjects":[{"kind":"ServiceAccount","name":"default","namespace":"tenant-b"}]}`), "binds"},
		"binding a group":               {istiod, obj(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"istiod-lc1","namespace":"lc1-istio-system"},"subjects":[{"kind":"Group","name":"system:authenticated"}]}`), "binds"},
		"hostNetwork":                   {gw, deploy(`{"hostNetwork":true,"containers":[{"name":"c","image":"auto"}]}`), "hostNetwork"},
		"hostPath":                      {gw, deploy(`{"volumes":[{"name":"v","hostPath":{"path":"/"}}],"containers":[{"name":"c","image":"auto"}]}`), "hostPath"},
		"privileged":                    {gw, deploy(`{"containers":[{"name":"c","image":"auto","securityContext":{"privileged":true}}]}`), "privileged"},
		"foreign image":                 {gw, deploy(`{"containers":[{"name":"c","image":"evil.example/x:1.31.0"}]}`), "image"},
		"caBundle":                      {istiod, hooks(`{"name":"a","clientConfig":{"caBundle":"eA==","service":{"name":"istiod-lc1","namespace":"lc1-istio-system"}},` + sel + `}`), "caBundle"},
		"webhook URL":                   {istiod, hooks(`{"name":"a","clientConfig":{"url":"https://203.0.113.7/"},` + sel + `}`), "URL"},
		"other istiod":                  {istiod, hooks(`{"name":"a","clientConfig":{"service":{"name":"istiod-other","namespace":"other-istio-system"}},` + sel + `}`), "istiod-lc1"},
		"no DCM selector":               {istiod, hooks(`{"name":"a","clientConfig":{"service":{"name":"istiod-lc1","namespace":"lc1-istio-system"}}}`), "does not select"},
	} {
		err := checkChartObject(in, c, tc.r, tc.o)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// TestEveryWebhookScoped walks every webhook Render makes: each selects
// namespaces by the logical cloud's DCM labels, none selects pods by
// their revision label alone, and each calls the logical cloud's istiod.
func TestEveryWebhookScoped(t *testing.T) {
	in := testInput()
	out, err := Render(in)
	require.NoError(t, err)
	n := 0
	for _, m := range out[0].Manifests {
		o, err := parseObject(m.JSON)
		require.NoError(t, err)
		kind := o.str("kind")
		if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
			continue
		}
		for _, h := range o["webhooks"].([]any) {
			n++
			hook := h.(map[string]any)
			name := hook["name"].(string)
			require.False(t, strings.HasPrefix(name, "rev.object."), "%s: selects by pod label alone", name)
			ml := hook["namespaceSelector"].(map[string]any)["matchLabels"].(map[string]any)
			for k, v := range kube.Labels(in.Project, in.LogicalCloud) {
				require.Equal(t, v, ml[k], "%s %s: namespaceSelector %s", kind, name, k)
			}
			svc := hook["clientConfig"].(map[string]any)["service"].(map[string]any)
			require.Equal(t, "istiod-lc1", svc["name"])
			require.Equal(t, in.IstioNamespace, svc["namespace"])
		}
	}
	require.Equal(t, 2, n, "the injector's namespace webhook and the validator")
}
