package kubetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDNSResolvesServices: after StartDNS, a pod of dnsPolicy ClusterFirst
// (the default) reaches a Service by its name, short and full (the
// kubelet's clusterDNS and search path, CoreDNS's kubernetes plugin), and
// a name no Service has does not resolve.
func TestDNSResolvesServices(t *testing.T) {
	h := ForTestsWithNodes(t, 1)
	c := h.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string { return c.MustKubectl(ctx, t, args...) }
	require.NoError(t, c.StartDNS(ctx))
	require.Equal(t, c.DNSIP(), kubectl("-n", "kube-system", "get", "service", "kube-dns", "-o", "jsonpath={.spec.clusterIP}"))
	kubectl("create", "namespace", "dns-a")
	kubectl("run", "server", "-n", "dns-a", "--image="+agnhost, "--image-pull-policy=Never", "--port=8080", "--expose",
		"--", "netexec", "--http-port=8080")
	kubectl("run", "client", "-n", "dns-a", "--image="+agnhost, "--image-pull-policy=Never", "--", "pause")
	c.MustWait(ctx, t, "dns-a", "--for=condition=Ready", "pod", "--all", "--timeout=120s")
	connect := func(to string) error {
		_, err := c.Kubectl(ctx, "exec", "-n", "dns-a", "client", "--", "/agnhost", "connect", to, "--timeout=5s")
		return err
	}
	// kube-proxy programs a new Service's rules a moment after it exists.
	require.NoError(t, poll(ctx, time.Minute, func() error { return connect("server:8080") }),
		"the Service by its short name (search path)")
	require.NoError(t, connect("server.dns-a.svc.cluster.local:8080"), "by its full name")
	require.NoError(t, connect("kubernetes.default:443"), "another namespace's Service")
	err := connect("no-such-service:8080")
	require.Error(t, err)
	require.Contains(t, err.Error(), "DNS", "agnhost connect reports a failed lookup")
}
