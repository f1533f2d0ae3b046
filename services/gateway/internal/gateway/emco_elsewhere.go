package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/errs"
)

// EMCO's example files (examples/ in EMCO's tree: dcm-advanced, dtc, ...)
// send, beside DCM's resources, those of EMCO's other controllers:
// the orchestrator's composite apps and deployment intent groups, the
// controller registries, clm's cluster labels and kv-pairs, ncm's networks.
// DCM has none of them; a request for one is answered 501 with what DCM
// does instead, never a bare "no route". docs/emco.md's list is written
// from this table (services/gateway/cmd/emcodoc, `make generate`).

// An ElsewhereRoute is a URL family of EMCO's that DCM does not serve.
type ElsewhereRoute struct {
	// Pattern is the path under /v2/: literal segments, * for any one
	// segment, and a last ** for any number (none included).
	Pattern string
	// What names the EMCO resource and its controller.
	What string
	// Instead is what DCM does instead.
	Instead string
}

// Elsewhere is the table, most specific pattern first: the first match
// answers.
var Elsewhere = []ElsewhereRoute{
	{"projects/*/composite-apps/*/*/deployment-intent-groups/*/traffic-group-intents/**",
		"traffic group intents (EMCO's dtc)",
		"DCM's traffic intents are built in: /v2/projects/{project}/rb/{composite-app}/{version}/traffic-intent-groups (docs/traffic.md)"},
	{"projects/*/composite-apps/**",
		"composite apps, apps, composite profiles and deployment intent groups (EMCO's orchestrator)",
		"DCM has no composite apps: deploy workloads with the logical cloud's kubeconfig, GET /v2/projects/{project}/logical-clouds/{lc}/cluster-references/{name}/kubeconfig"},
	{"projects/*/ca-certs/**",
		"CA certificate intents (EMCO's ca-certs)",
		"DCM gives each mesh-enabled logical cloud its own CA (spec.service-mesh; docs/mesh.md) and distributes roots at /v2/cadist/roots"},
	{"cluster-providers/*/ca-certs/**",
		"CA certificate intents (EMCO's ca-certs)",
		"DCM gives each mesh-enabled logical cloud its own CA (spec.service-mesh; docs/mesh.md) and distributes roots at /v2/cadist/roots"},
	{"controllers/**",
		"orchestrator controllers (placement and action controllers)",
		"DCM's resource synchronizer is built in: there is no controller to register"},
	{"dtc-controllers/**",
		"traffic sub-controllers (EMCO's dtc)",
		"DCM's traffic controller is built in: there is no controller to register"},
	{"clm-controllers/**",
		"cluster manager controllers (EMCO's clm)",
		"DCM's cluster registry is built in: there is no controller to register"},
	{"cluster-providers/*/clusters/*/labels/**",
		"cluster labels (EMCO's clm)",
		"a DCM cluster's labels are its spec.labels: PUT /v2/cluster-providers/{provider}/clusters/{name}"},
	{"cluster-providers/*/clusters/*/kv-pairs/**",
		"cluster kv-pairs (EMCO's clm)",
		"a DCM cluster keeps no key-value pairs: use its metadata userData1 and userData2"},
	{"cluster-providers/*/cluster-sync-objects/**",
		"GitOps cluster sync objects (EMCO's clm)",
		"DCM registers clusters by kubeconfig only"},
	{"cluster-providers/*/clusters/*/networks/**",
		"cluster networks (EMCO's ncm)",
		"DCM does not configure cluster networks: each logical cloud gets network policies (docs/logical-clouds.md, \"Network policies\")"},
	{"cluster-providers/*/clusters/*/provider-networks/**",
		"provider networks (EMCO's ncm)",
		"DCM does not configure cluster networks: each logical cloud gets network policies (docs/logical-clouds.md, \"Network policies\")"},
	{"cluster-providers/*/clusters/*/apply",
		"network intents' apply (EMCO's ncm)",
		"DCM does not configure cluster networks: each logical cloud gets network policies (docs/logical-clouds.md, \"Network policies\")"},
	{"cluster-providers/*/clusters/*/terminate",
		"network intents' terminate (EMCO's ncm)",
		"DCM does not configure cluster networks: each logical cloud gets network policies (docs/logical-clouds.md, \"Network policies\")"},
}

// elsewhere is the entry of Elsewhere that path (a request's path) falls
// in, if any.
func elsewhere(path string) (ElsewhereRoute, bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return ElsewhereRoute{}, false
	}
	segs := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	for _, e := range Elsewhere {
		if matchSegments(strings.Split(e.Pattern, "/"), segs) {
			return e, true
		}
	}
	return ElsewhereRoute{}, false
}

// matchSegments matches path segments against a pattern's: * is one
// non-empty segment, a last ** any number.
func matchSegments(pat, segs []string) bool {
	for i, p := range pat {
		if p == "**" {
			return true
		}
		if i >= len(segs) || segs[i] == "" || (p != "*" && p != segs[i]) {
			return false
		}
	}
	return len(pat) == len(segs)
}

// Message is the answer's message.
func (e ElsewhereRoute) Message() string {
	return fmt.Sprintf("DCM does not serve EMCO's %s: %s", e.What, e.Instead)
}

// answerElsewhere writes 501 with e's message.
func answerElsewhere(w http.ResponseWriter, e ElsewhereRoute) {
	errs.WriteHTTPStatus(w, http.StatusNotImplemented, status.New(codes.Unimplemented, e.Message()))
}

// ElsewhereDoc is the table as docs/emco.md lists it.
func ElsewhereDoc() string {
	var b strings.Builder
	b.WriteString("| EMCO URL (under `/v2/`) | EMCO's | DCM instead |\n|---|---|---|\n")
	for _, e := range Elsewhere {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Pattern, e.What, e.Instead)
	}
	return b.String()
}
