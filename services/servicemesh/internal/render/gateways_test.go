package render_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// gatewayObjects are one cluster's objects of a gateway, by kind.
type gatewayObjects struct {
	service    map[string]any
	deployment map[string]any
	sa         bool
}

func gateways(t *testing.T, c render.ClusterManifests) map[string]*gatewayObjects {
	t.Helper()
	out := map[string]*gatewayObjects{}
	for _, m := range c.Manifests {
		o := parse(t, m.JSON)
		name := o.Metadata.Name
		if name != render.EastWestGateway && name != render.IngressGateway && name != render.EgressGateway {
			continue
		}
		g := out[name]
		if g == nil {
			g = &gatewayObjects{}
			out[name] = g
		}
		switch o.Kind {
		case "Service":
			g.service = o.raw
		case "Deployment":
			g.deployment = o.raw
		case "ServiceAccount":
			g.sa = true
		}
	}
	return out
}

// at walks a decoded JSON object along keys.
func at(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%v at %s", keys, k)
		v = m[k]
	}
	return v
}

type port struct {
	Name       string `json:"name"`
	Port       int    `json:"port"`
	TargetPort int    `json:"targetPort"`
	Protocol   string `json:"protocol"`
}

func ports(t *testing.T, svc map[string]any) []port {
	t.Helper()
	b, err := json.Marshal(at(t, svc, "spec", "ports"))
	require.NoError(t, err)
	var ps []port
	require.NoError(t, json.Unmarshal(b, &ps))
	return ps
}

var webPorts = []port{{"http2", 80, 80, "TCP"}, {"https", 443, 443, "TCP"}}

func TestGateways(t *testing.T) {
	t.Parallel()
	in := input("p1", "lc1", "lc1-istio-system")
	in.Clusters[1].LoadBalancerIP = "" // unknown: no address asked for
	out, err := render.Render(in)
	require.NoError(t, err)
	for i, c := range out {
		gws := gateways(t, c)
		require.Len(t, gws, 3, c.Cluster)
		ew, ing, eg := gws[render.EastWestGateway], gws[render.IngressGateway], gws[render.EgressGateway]

		// Ingress and east-west share the cluster's address: same sharing
		// key, the reference's IP when known, no port in common.
		key := render.SharedIPKey("p1", "lc1")
		for _, svc := range []map[string]any{ew.service, ing.service} {
			require.Equal(t, key, at(t, svc, "metadata", "annotations", render.SharedIPAnnotation))
			require.Equal(t, "LoadBalancer", at(t, svc, "spec", "type"))
			if i == 0 {
				require.Equal(t, "192.0.2.10", at(t, svc, "spec", "loadBalancerIP"))
			} else {
				require.Nil(t, at(t, svc, "spec", "loadBalancerIP"))
			}
		}
		require.Equal(t, webPorts, ports(t, ing.service))
		ewPorts := map[int]bool{}
		for _, p := range ports(t, ew.service) {
			ewPorts[p.Port] = true
		}
		require.True(t, ewPorts[15443])
		for _, p := range ports(t, ing.service) {
			require.False(t, ewPorts[p.Port], "port %d on both gateways of one address", p.Port)
		}

		// Egress: in-cluster only.
		require.Equal(t, "ClusterIP", at(t, eg.service, "spec", "type"))
		require.Equal(t, webPorts, ports(t, eg.service))
		require.Nil(t, at(t, eg.service, "metadata", "annotations", render.SharedIPAnnotation))

		for name, want := range map[string]string{render.IngressGateway: "ingressgateway", render.EgressGateway: "egressgateway", render.EastWestGateway: "eastwestgateway"} {
			g := gws[name]
			require.True(t, g.sa, "ServiceAccount %s", name)
			require.Equal(t, name, at(t, g.deployment, "spec", "template", "spec", "serviceAccountName"))
			podLabels := at(t, g.deployment, "spec", "template", "metadata", "labels")
			for k, v := range map[string]string{"istio": want, "app": name, "dcm.io/project": "p1", "dcm.io/logical-cloud": "lc1", "istio.io/rev": "lc1"} {
				require.Equal(t, v, at(t, podLabels, k), "%s pod label %s", name, k)
			}
			sel := at(t, g.service, "spec", "selector")
			require.Equal(t, want, at(t, sel, "istio"), name)
			require.Equal(t, name, at(t, sel, "app"), name)
		}
	}
	// Another logical cloud on the same cluster never shares the address.
	require.NotEqual(t, render.SharedIPKey("p1", "lc1"), render.SharedIPKey("p1", "lc2"))
	require.NotEqual(t, render.SharedIPKey("p-a", "b"), render.SharedIPKey("p", "a-b"))
}

// TestDNSCapture: sidecars proxy DNS (so clients resolve ServiceEntry
// hosts) and istiod allocates addresses for ServiceEntries.
func TestDNSCapture(t *testing.T) {
	t.Parallel()
	out, err := render.Render(input("p1", "lc1", "lc1-istio-system"))
	require.NoError(t, err)
	var mesh string
	var env []any
	for _, m := range out[0].Manifests {
		o := parse(t, m.JSON)
		switch {
		case o.Kind == "ConfigMap" && o.Metadata.Name == "istio-lc1":
			mesh, _ = at(t, o.raw, "data", "mesh").(string)
		case o.Kind == "Deployment" && o.Metadata.Name == "istiod-lc1":
			containers, _ := at(t, o.raw, "spec", "template", "spec", "containers").([]any)
			require.NotEmpty(t, containers)
			env, _ = at(t, containers[0], "env").([]any)
		}
	}
	require.Contains(t, mesh, "proxyMetadata:\n    ISTIO_META_DNS_CAPTURE: \"true\"")
	require.NotContains(t, mesh, "ISTIO_META_DNS_AUTO_ALLOCATE", "deprecated in this Istio")
	found := false
	for _, e := range env {
		if at(t, e, "name") == "PILOT_ENABLE_IP_AUTOALLOCATE" {
			require.Equal(t, "true", at(t, e, "value"))
			found = true
		}
	}
	require.True(t, found, "istiod's env sets PILOT_ENABLE_IP_AUTOALLOCATE")
}
