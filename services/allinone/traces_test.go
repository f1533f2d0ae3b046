package allinone_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it keeps every
// span it is sent, with its resource's service.name.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []recvSpan
}

type recvSpan struct {
	service string
	*tracev1.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortracev1.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			svc := attr(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					rc.spans = append(rc.spans, recvSpan{svc, s})
				}
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&collectortracev1.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// trace returns the spans of trace id.
func (rc *otlpReceiver) trace(id []byte) []recvSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []recvSpan
	for _, s := range rc.spans {
		if bytes.Equal(s.GetTraceId(), id) {
			out = append(out, s)
		}
	}
	return out
}

func (rc *otlpReceiver) all() []recvSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recvSpan(nil), rc.spans...)
}

func attr(kvs []*commonv1.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// logLines parses the program's JSON log lines.
func logLines(t *testing.T, b *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "a log line that is not JSON: %s", sc.Text())
		out = append(out, m)
	}
	return out
}

const traceLC = `{"metadata":{"name":"lc-traced"},"spec":{"namespace":"traced-ns","user":{"user-name":"user-1","type":"certificate",
  "user-permissions":[{"permission-name":"p1","apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}]}}}`

// TestOneTraceFromRESTToEachCluster applies a logical cloud on a real
// cluster with traces exported to an in-process OTLP receiver, and
// follows the apply's trace: the REST call's span, the gateway's call to
// core, core's calls to the renderers and to rsync, and rsync's pass on
// the cluster (with the project, logical cloud and cluster), all one trace
// whose parent links connect to the REST span. The spans arrive when the
// program stops (the batch's default delay is longer than the test), so it
// also shows that a stop flushes them. The logs of the request carry the
// trace id. Not parallel: the program reads the OTLP variables from the
// environment at start.
func TestOneTraceFromRESTToEachCluster(t *testing.T) {
	rc := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	h := kubetest.ForTests(t, 3)
	logs := &syncBuffer{}
	s := stacktest.StartWith(t, stacktest.Options{Logs: logs, Args: []string{"-log-level", "info"}})
	r := apitest.NewREST(t, s)
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"traced"}}`)
	lc := "/v2/projects/traced/logical-clouds/lc-traced"
	r.Want(201, "POST", "/v2/projects/traced/logical-clouds", traceLC)
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+h.Clusters[0].Name+`"}`)

	const reqID = "traced-apply-1"
	req, err := http.NewRequest("POST", s.URL+lc+"/apply", nil)
	require.NoError(t, err)
	req.Header.Set("X-Request-Id", reqID)
	resp, err := s.Admin.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, 202, resp.StatusCode)
	r.Settle(lc, "Instantiated")
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
	s.Stop() // flushes the batched spans

	// The REST span of the apply starts the trace.
	var root recvSpan
	for _, sp := range rc.all() {
		if sp.GetKind() == tracev1.Span_SPAN_KIND_SERVER && strings.HasSuffix(attr(sp.GetAttributes(), "http.route"), "/apply") {
			require.Nil(t, root.Span, "one REST span for the one apply")
			root = sp
		}
	}
	require.NotNil(t, root.Span, "no REST span for the apply among %d spans", len(rc.all()))
	require.Empty(t, root.GetParentSpanId(), "the REST call starts the trace")
	require.Equal(t, "POST "+attr(root.GetAttributes(), "http.route"), root.GetName())
	require.Equal(t, "dcm", root.service)

	spans := rc.trace(root.GetTraceId())
	byID := map[string]recvSpan{}
	for _, sp := range spans {
		byID[string(sp.GetSpanId())] = sp
	}
	// Every span's parent is in the trace, up to the REST span.
	for _, sp := range spans {
		if sp.Span == root.Span {
			continue
		}
		_, ok := byID[string(sp.GetParentSpanId())]
		require.True(t, ok, "span %q has parent %x, which is not in the trace", sp.GetName(), sp.GetParentSpanId())
	}
	under := func(sp, anc recvSpan) bool {
		for p := sp; ; {
			q, ok := byID[string(p.GetParentSpanId())]
			if !ok {
				return false
			}
			if q.Span == anc.Span {
				return true
			}
			p = q
		}
	}
	// call finds the client span of an RPC (name matching re) under
	// parent, and its server span, a child of it.
	call := func(parent recvSpan, re string) recvSpan {
		t.Helper()
		m := regexp.MustCompile(re)
		for _, c := range spans {
			if c.GetKind() != tracev1.Span_SPAN_KIND_CLIENT || !m.MatchString(c.GetName()) || !under(c, parent) {
				continue
			}
			for _, sv := range spans {
				if sv.GetKind() == tracev1.Span_SPAN_KIND_SERVER && sv.GetName() == c.GetName() && bytes.Equal(sv.GetParentSpanId(), c.GetSpanId()) {
					return sv
				}
			}
			t.Fatalf("no server span under the client span %q", c.GetName())
		}
		var names []string
		for _, sp := range spans {
			names = append(names, sp.GetKind().String()+" "+sp.GetName())
		}
		t.Fatalf("no call matching %s under %q in the trace: %v", re, parent.GetName(), names)
		return recvSpan{}
	}
	core := call(root, `^dcm\.core\.v1\.LogicalCloudService/`)
	require.Equal(t, root.GetSpanId(), byID[string(core.GetParentSpanId())].GetParentSpanId(), "the gateway's call to core is the REST span's child")
	call(core, `^dcm\.namespace\.v1\.NamespaceInternalService/RenderNamespace$`)
	call(core, `^dcm\.user\.v1\.UserInternalService/RenderUsers$`)
	call(core, `^dcm\.quota\.v1\.QuotaInternalService/RenderQuotas$`)
	submit := call(core, `^dcm\.rsync\.v1\.RsyncInternalService/(Submit|Update)Rollout$`)

	// rsync's pass on the cluster, after the RPC returned, is in the trace.
	var passes []recvSpan
	for _, sp := range spans {
		if sp.GetName() == "rsync apply" {
			passes = append(passes, sp)
		}
	}
	require.NotEmpty(t, passes, "no rsync pass in the apply's trace")
	converged := false
	for _, p := range passes {
		require.Equal(t, submit.GetSpanId(), p.GetParentSpanId(), "a pass is a child of the rollout's submission")
		require.Equal(t, "traced", attr(p.GetAttributes(), "dcm.project"))
		require.Equal(t, "lc-traced", attr(p.GetAttributes(), "dcm.logical_cloud"))
		require.Equal(t, "edge", attr(p.GetAttributes(), "dcm.cluster_provider"))
		require.Equal(t, h.Clusters[0].Name, attr(p.GetAttributes(), "dcm.cluster"))
		converged = converged || attr(p.GetAttributes(), "dcm.result") == "converged"
	}
	require.True(t, converged, "a pass converged")

	// The terminate's trace reaches the cluster too, with the delete pass.
	deleted := false
	for _, sp := range rc.all() {
		if sp.GetName() == "rsync delete" && attr(sp.GetAttributes(), "dcm.logical_cloud") == "lc-traced" {
			require.NotEmpty(t, sp.GetParentSpanId(), "the delete pass joins the terminate's trace")
			require.NotEqual(t, root.GetTraceId(), sp.GetTraceId())
			deleted = true
		}
	}
	require.True(t, deleted, "no delete pass span")

	// The logs: every line of the apply's request carries its trace id,
	// and the trace id reaches the other services' request lines.
	tid := hex.EncodeToString(root.GetTraceId())
	methods := map[string]bool{}
	ofRequest := 0
	for _, l := range logLines(t, logs) {
		if l["request_id"] == reqID {
			ofRequest++
			require.Equal(t, tid, l["trace_id"], "a log line of the apply without its trace id: %v", l)
		}
		if l["trace_id"] == tid {
			if m, ok := l["grpc.method"].(string); ok {
				methods[m] = true
			}
		}
	}
	require.NotZero(t, ofRequest, "no log line with the apply's request id")
	for _, m := range []string{"RenderNamespace", "RenderUsers", "SubmitRollout"} {
		found := false
		for k := range methods {
			found = found || strings.HasSuffix(k, "/"+m)
		}
		require.True(t, found, "no %s log line with the apply's trace id (lines with it: %v)", m, methods)
	}
}
