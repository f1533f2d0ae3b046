package gateway

import (
	"io"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
)

func lenient() *lenientJSON { return &lenientJSON{JSONPb: &runtime.JSONPb{}} }

func TestLenientDecoderSeedShapes(t *testing.T) {
	t.Parallel()
	var m *trafficv1.ConnectivityIntent
	err := lenient().NewDecoder(strings.NewReader(`{"connectivityResource": [
		{"microservice01": {"name": "httpbin01", "mutualTLS": "true", "port": "80",
			"clientServices": [{"clientServiceName": "a", "headless": "false"}]}},
		{"id": "flat", "egressgateway": true}]}`)).Decode(&m)
	require.NoError(t, err)
	r := m.GetConnectivityResource()
	require.Equal(t, "microservice01", r[0].GetId())
	require.True(t, r[0].GetMutualTls())
	require.Equal(t, int32(80), r[0].GetPort())
	require.False(t, r[0].GetClientServices()[0].GetHeadless())
	require.Equal(t, "flat", r[1].GetId())
	require.True(t, r[1].GetEgressgateway())

	var ic *trafficv1.InterclusterIntent
	require.NoError(t, lenient().NewDecoder(strings.NewReader(`{"mutualTLS": "false", "loadbalancing": "true"}`)).Decode(&ic))
	require.True(t, ic.GetLoadbalancing())
}

func TestLenientDecoderRefusals(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"mutualTLS": "yes"}`:                                                  `parsing field "mutualTLS"`,
		`{"connectivityResource": [{"m1": {"id": "m2"}}]}`:                      `parsing field "connectivityResource[0].id"`,
		`{"connectivityResource": [{"m1": {"headless": "no"}}]}`:                `parsing field "connectivityResource[0].headless"`,
		`{"connectivityResource": [{"id": "a", "clientServices": [{"x": 1}]}]}`: `unknown field "x"`,
		`{"type:": "intracluster"}`:                                             `unknown field "type:"`,
	} {
		var m *trafficv1.InterclusterIntent
		var c *trafficv1.ConnectivityIntent
		err := lenient().NewDecoder(strings.NewReader(body)).Decode(&m)
		if strings.Contains(body, "connectivityResource") {
			err = lenient().NewDecoder(strings.NewReader(body)).Decode(&c)
		}
		require.ErrorContains(t, err, want, body)
	}
}

// TestLenientDecoderOtherPackages: only the traffic controller's bodies are
// rewritten; elsewhere a flag written as a string stays an error.
func TestLenientDecoderOtherPackages(t *testing.T) {
	t.Parallel()
	var m *corev1.Project
	err := lenient().NewDecoder(strings.NewReader(`{"metadata": {"name": "p"}}`)).Decode(&m)
	require.NoError(t, err)
	require.Equal(t, "p", m.GetMetadata().GetName())
	var sm *corev1.ServiceMesh
	err = lenient().NewDecoder(strings.NewReader(`{"enabled": "true"}`)).Decode(&sm)
	require.Error(t, err, "core's bodies are decoded as sent")
	require.Error(t, protojson.Unmarshal([]byte(`{"enabled": "true"}`), &corev1.ServiceMesh{}))
}

// TestSyntaxErrorSaysWhere: a body that is not JSON (the seeds' //
// comments, a missing comma) is refused with the line and column where
// it stops being JSON, in runes, for every package's bodies; no body
// stays io.EOF for grpc-gateway to accept.
func TestSyntaxErrorSaysWhere(t *testing.T) {
	t.Parallel()
	for body, where := range map[string]string{
		"{\n\"metadata\" : {\n\"name\": \"lc-1\", //unique name\n}}": "line 3, column 17",
		`{"metadata": {"name": "lc-1" "description": "x"}}`:          "line 1, column 30",
		"{\n  \"metadata\": {\"description\": \"é\" // x\n}}":        "line 2, column 35",
		"{\"name\": \"g\",\n \"description\": \"d\",\n}":             "line 3, column 1",
	} {
		var lc *corev1.CreateLogicalCloudRequest
		err := lenient().NewDecoder(strings.NewReader(body)).Decode(&lc)
		require.Error(t, err, body)
		require.Contains(t, err.Error(), "("+where+")", body)
		var g *trafficv1.TrafficIntentGroup
		err = lenient().NewDecoder(strings.NewReader(body)).Decode(&g)
		require.Error(t, err, body)
		require.Contains(t, err.Error(), "("+where+")", "%s (the traffic service's lenient decoding)", body)
	}
	var lc *corev1.CreateLogicalCloudRequest
	require.ErrorIs(t, lenient().NewDecoder(strings.NewReader("")).Decode(&lc), io.EOF)
}
