package allinone_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// dashboardFile is the Grafana dashboard deploy/ ships.
const dashboardFile = "../../deploy/grafana/dcm.json"

// dashboardExprs returns every PromQL query of the dashboard's panels and
// template variables.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q has a target without a query", p.Title)
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	return out
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}
)

// promMetrics returns the metric names a PromQL expression (or a Grafana
// label_values(metric, label) definition) selects: identifiers that are
// not functions, keywords, labels (in matchers and groupings) or strings.
func promMetrics(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, "")
	s = promRange.ReplaceAllString(s, "")
	s = promGrouping.ReplaceAllString(s, "")
	if rest, ok := strings.CutPrefix(strings.TrimSpace(s), "label_values("); ok {
		metric, _, _ := strings.Cut(rest, ",")
		return []string{strings.TrimSpace(metric)}
	}
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if promKeywords[strings.ToLower(name)] || strings.HasPrefix(name, "$") {
			continue
		}
		if loc[0] > 0 && (s[loc[0]-1] == '$' || s[loc[0]-1] == '.' || (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9')) {
			continue // a Grafana variable or part of a number
		}
		if strings.HasPrefix(strings.TrimLeft(s[loc[1]:], " "), "(") {
			continue // a function
		}
		out = append(out, name)
	}
	return out
}

func TestPromMetrics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ expr, want string }{
		{`sum by (route) (rate(dcm_rest_request_seconds_count{job=~"$job",code=~"5.."}[$__rate_interval]))`, "dcm_rest_request_seconds_count"},
		{`histogram_quantile(0.95, sum by (le) (rate(a_bucket[5m]))) / on(instance) group_left(x) b`, "a_bucket b"},
		{`label_values(dcm_grpc_requests_total, job)`, "dcm_grpc_requests_total"},
		{`sum without (code) (x offset 5m) > bool 1e3`, "x"},
	} {
		require.Equal(t, c.want, strings.Join(promMetrics(c.expr), " "), c.expr)
	}
}

// TestDashboardQueriesExistInMetrics checks that every metric the Grafana
// dashboard queries is in the program's /metrics after a logical cloud was
// applied on a real cluster and terminated (what makes the rollout and
// store series appear), so the dashboard cannot drift from the code. It
// scrapes as Prometheus does: plain HTTP on the metrics listener
// (DCM_METRICS_ADDR), without any credential.
func TestDashboardQueriesExistInMetrics(t *testing.T) {
	t.Parallel()
	want := map[string]bool{}
	for _, e := range dashboardExprs(t) {
		names := promMetrics(e)
		require.NotEmpty(t, names, "no metric found in %q", e)
		for _, n := range names {
			want[n] = true
		}
	}

	h := kubetest.ForTests(t, 3)
	stack := stacktest.StartWith(t, stacktest.Options{Args: []string{"-metrics-addr", "127.0.0.1:0"}})
	require.NotEmpty(t, stack.Server.MetricsAddr(), "the metrics listener is on")
	r := apitest.NewREST(t, stack)
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"dash"}}`)
	lc := "/v2/projects/dash/logical-clouds/lc-dash"
	r.Want(201, "POST", "/v2/projects/dash/logical-clouds", `{"metadata":{"name":"lc-dash"},"spec":{"namespace":"dash-ns"}}`)
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+h.Clusters[0].Name+`"}`)
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")
	r.Want(404, "GET", "/v2/projects/dash/logical-clouds/missing", "")
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")

	// No client certificate, no token, no TLS.
	code, scraped := apitest.Call(t, &http.Client{Timeout: 30 * time.Second}, "GET", "http://"+stack.Server.MetricsAddr()+"/metrics", "")
	require.Equal(t, http.StatusOK, code, "%s", scraped)
	series := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(scraped))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		series[name] = true
	}
	require.NoError(t, sc.Err())
	var missing []string
	for n := range want {
		if !series[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "metrics %s queries that /metrics does not have", dashboardFile)
}
