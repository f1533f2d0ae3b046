package allinone_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// adminCreds are what `grpcurl -cacert ca.crt -cert admin.crt -key admin.key` uses.
func adminCreds(t *testing.T, s *stacktest.Stack) grpc.DialOption {
	t.Helper()
	dir := filepath.Join(s.DataDir, "pki")
	m, err := pki.Load(pki.Files{CA: filepath.Join(dir, pki.CACertFile), Cert: filepath.Join(dir, pki.AdminCertFile), Key: filepath.Join(dir, pki.AdminKeyFile)})
	require.NoError(t, err)
	return grpc.WithTransportCredentials(credentials.NewTLS(m.Client()))
}

// listServices does what `grpcurl -cacert ca.crt -cert admin.crt -key admin.key ADDR list` does.
func listServices(t *testing.T, addr string, creds grpc.DialOption) []string {
	t.Helper()
	conn, err := grpc.NewClient(addr, creds)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	sort.Strings(names)
	return names
}

var dcmServices = []string{
	"dcm.cadist.v1.CaDistService",
	"dcm.auth.v1.AuthService",
	"dcm.core.v1.CoreService",
	"dcm.keys.v1.KeyService",
	"dcm.namespace.v1.NamespaceService",
	"dcm.quota.v1.QuotaService",
	"dcm.rsync.v1.RsyncService",
	"dcm.servicemesh.v1.ServiceMeshService",
	"dcm.traffic.v1.TrafficService",
	"dcm.user.v1.UserService",
}

func TestEveryServiceIsServedWithHealthAndReflection(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	names := listServices(t, s.GRPC, adminCreds(t, s))
	for _, want := range append(dcmServices, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection") {
		require.Contains(t, names, want)
	}

	conn, err := grpc.NewClient(s.GRPC, adminCreds(t, s))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	hc := healthpb.NewHealthClient(conn)
	for _, svc := range dcmServices {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus(), svc)
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestHealthMetricsAndOpenAPI(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	code, body := get(t, s.Admin, s.URL+"/healthz")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"status":"ok"}`, body)

	code, _ = get(t, s.Admin, s.URL+"/v2/projects")
	require.Equal(t, 200, code)
	code, body = get(t, s.Admin, s.URL+"/metrics")
	require.Equal(t, 200, code)
	require.Contains(t, body, `dcm_grpc_requests_total{code="OK",method="/dcm.core.v1.CoreService/ListProjects"}`)

	code, body = get(t, s.Admin, s.URL+"/openapi.json")
	require.Equal(t, 200, code)
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	require.Contains(t, doc.Paths, "/v2/projects")
	require.Contains(t, doc.Paths["/v2/projects/{project}"], "put")
	require.True(t, strings.Contains(body, `"userData1"`), "OpenAPI uses the documented JSON names")
}

// TestTwoInstancesSideBySide: nothing listens on a fixed port, so two
// programs with their own addresses and data dirs run at once.
func TestTwoInstancesSideBySide(t *testing.T) {
	t.Parallel()
	a, b := stacktest.Start(t), stacktest.Start(t)
	require.Equal(t, 201, first(apitest.Call(t, a.Admin, "POST", a.URL+"/v2/projects", `{"metadata":{"name":"only-in-a"}}`)))
	code, _ := apitest.Call(t, b.Admin, "GET", b.URL+"/v2/projects/only-in-a", "")
	require.Equal(t, 404, code, "separate stores")
	code, _ = apitest.Call(t, a.Admin, "GET", a.URL+"/v2/projects/only-in-a", "")
	require.Equal(t, 200, code)
}

// TestOneProgramPerDataDir: a second program on a data directory another
// one runs on stops at once, naming the holder's pid, so two programs
// never drive the same clusters from one store; the first goes on.
func TestOneProgramPerDataDir(t *testing.T) {
	a := stacktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := app.Start(ctx, allinone.Name, []string{"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0",
		"-data-dir", a.DataDir, "-log-level", "error"}, true, allinone.Build, app.LogTo(io.Discard))
	require.ErrorContains(t, err, fmt.Sprintf("in use by pid %d", os.Getpid()))
	code, _ := apitest.Call(t, a.Admin, "GET", a.URL+"/v2/projects", "")
	require.Equal(t, 200, code, "the first program still serves")
}
