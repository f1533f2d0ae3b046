package allinone_test

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestClusterEndpoints: an admin cannot register (or update) a cluster
// whose kubeconfig would send its credentials in clear, unverified or
// through a proxy without allow-insecure, nor at a link-local or metadata
// address at all. The check reads the kubeconfig only: the servers and
// proxies of the accepted cases are a listener that counts connections,
// and it sees none.
func TestClusterEndpoints(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var dialed atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	trap := ln.Addr().String()

	caLine := regexp.MustCompile(`(?m)^    certificate-authority-data: .*$`)
	config := func(server, extra string) string {
		kc, _ := kubeconfig(t, s.CA, server)
		switch extra {
		case "skip-verify":
			kc = caLine.ReplaceAllString(kc, "    insecure-skip-tls-verify: true")
		case "":
		default:
			kc = strings.Replace(kc, "    server: "+server+"\n", "    server: "+server+"\n    proxy-url: "+extra+"\n", 1)
		}
		return kc
	}
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)))
	for i, tc := range []struct {
		name   string
		server string
		extra  string // "skip-verify" or a proxy-url
		allow  bool
		want   int
		field  string
		says   string
	}{
		{"https loopback", "https://127.0.0.1:1", "", false, 201, "", ""},
		{"https trap", "https://" + trap, "", false, 201, "", ""},
		{"http refused", "http://127.0.0.1:1", "", false, 400, "spec.kubeconfig", "allow-insecure"},
		{"http allowed", "http://" + trap, "", true, 201, "", ""},
		{"metadata ip", "https://169.254.169.254", "", false, 400, "spec.kubeconfig", "link-local"},
		{"metadata ip allowed", "http://169.254.169.254", "", true, 400, "spec.kubeconfig", "link-local"},
		{"metadata ip mapped", "https://[::ffff:169.254.169.254]", "", true, 400, "spec.kubeconfig", "link-local"},
		{"metadata ip numeric", "https://2852039166", "", true, 400, "spec.kubeconfig", "numeric"},
		{"link-local v6", "https://[fe80::1]:6443", "", false, 400, "spec.kubeconfig", "link-local"},
		{"link-local v6 allowed", "https://[fe80::1%25eth0]:6443", "", true, 400, "spec.kubeconfig", "link-local"},
		{"metadata v6", "https://[fd00:ec2::254]", "", true, 400, "spec.kubeconfig", "metadata"},
		{"metadata name", "https://metadata.google.internal", "", true, 400, "spec.kubeconfig", "metadata"},
		{"metadata name dot", "https://Metadata.Google.Internal.:443", "", false, 400, "spec.kubeconfig", "metadata"},
		{"proxy refused", "https://127.0.0.1:1", "http://" + trap, false, 400, "spec.kubeconfig", "proxy-url"},
		{"proxy allowed", "https://127.0.0.1:1", "http://" + trap, true, 201, "", ""},
		{"proxy to metadata", "https://127.0.0.1:1", "http://169.254.169.254:80", true, 400, "spec.kubeconfig", "link-local"},
		{"skip verify refused", "https://127.0.0.1:1", "skip-verify", false, 400, "spec.kubeconfig", "insecure-skip-tls-verify"},
		{"skip verify allowed", "https://" + trap, "skip-verify", true, 201, "", ""},
		{"http allowed, port 1", "http://127.0.0.1:1", "", true, 201, "", ""},
		{"bare host:port", "127.0.0.1:1", "", false, 201, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("c%d", i)
			body := fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"kubeconfig":%q,"allow-insecure":%t}}`, name, config(tc.server, tc.extra), tc.allow)
			code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cluster-providers/edge/clusters", body)
			require.Equal(t, tc.want, code, "%s", b)
			if tc.want != 400 {
				require.Equal(t, tc.allow, decode(t, b).(map[string]any)["spec"].(map[string]any)["allow-insecure"])
				return
			}
			e := decode(t, b).(map[string]any)
			require.Equal(t, tc.field, e["field"], "%s", b)
			require.Contains(t, e["message"], tc.says)
			// The same kubeconfig is refused on update of a good cluster.
			code, b = apitest.Call(t, s.Admin, "PUT", s.URL+"/v2/cluster-providers/edge/clusters/c0",
				fmt.Sprintf(`{"metadata":{"name":"c0"},"spec":{"kubeconfig":%q,"allow-insecure":%t}}`, config(tc.server, tc.extra), tc.allow))
			require.Equal(t, 400, code, "%s", b)
			require.Equal(t, tc.field, decode(t, b).(map[string]any)["field"])
		})
	}

	// allow-insecure cannot be turned off under a kubeconfig that needs it;
	// with a kubeconfig that does not, it can.
	code, b := apitest.Call(t, s.Admin, "PUT", s.URL+"/v2/cluster-providers/edge/clusters/c3",
		`{"metadata":{"name":"c3"},"spec":{"allow-insecure":false}}`)
	require.Equal(t, 400, code, "%s", b)
	require.Equal(t, "spec.allow-insecure", decode(t, b).(map[string]any)["field"])
	code, b = apitest.Call(t, s.Admin, "PUT", s.URL+"/v2/cluster-providers/edge/clusters/c3",
		fmt.Sprintf(`{"metadata":{"name":"c3"},"spec":{"kubeconfig":%q}}`, config("https://"+trap, "")))
	require.Equal(t, 200, code, "%s", b)
	require.Equal(t, false, decode(t, b).(map[string]any)["spec"].(map[string]any)["allow-insecure"])
	require.Zero(t, dialed.Load(), "registering a cluster dials nothing")
}
