package allinone_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// Seeds 000, 001, 002 and 004 (the design pages, /work/shared/seeds in the
// project's workspace) replayed: every request they show, in the pages'
// order, sent as the page writes it against the whole program, and its
// answer checked (docs/seeds.md says what is accepted where).
//
// - A request's URL is the page's, placeholders and all; seedNames gives
//   the placeholders their values (a row's names override them).
// - Where the page shows only a heading (seed 000 §7.1.2 to §7.8 name the
//   calls and show no URL), the URL and body are API.md's for that call,
//   and via says so.
// - A body is the page's text verbatim (the seedNNNLineNN constants,
//   seed_texts_test.go). Where that text is not JSON, repair says how it was
//   minimally made JSON and why: the gateway reads JSON (RFC 8259) only;
//   it does not take // comments, trailing commas or missing commas, as no
//   JSON client sends them (a client writing the page's text gets a 400
//   naming the line and column, checked after the table).
//   TestSeedBodiesRepaired checks each repair is needed and enough.
// - A variant is a second request the page's text implies (seed 000's
//   "Token" from its type comment; seed 002's user without the path it
//   gives as a certificate, which a server cannot read), named as such.
// - outOfScope rows are requests to the original system's internal
//   endpoints that API.md does not have: not sent, listed with the reason.

// seedNames are the placeholders' values.
var seedNames = map[string]string{
	"<project-name>": "proj1", "{project-name}": "proj1",
	"<logical-cloud-name>": "lc-1", "<cluster-provider-name>": "edge",
	"<name>": "logical-cloud-1", "{logicalcloud-name}": "logical-cloud-1", "<user-name>": "user-1",
	"{rb-name}": "rb1", "{rb-version}": "v1", "{version}": "v1",
	"{trafficgroup-name}": "john", "{trafficset-name}": "john", "{intent-name}": "john",
}

// seedEdit replaces from (which must be there, once) by to; with re,
// from is a regular expression and every match is replaced.
type seedEdit struct {
	from, to string
	re       bool
}

type seedRequest struct {
	seed string
	line int
	// method and url as the page writes them (url with its placeholders).
	method, url string
	names       map[string]string // placeholders of this request only
	via         string            // where the URL or body comes from when the page shows none
	// text is the body as the page writes it; body, if set, is sent
	// instead (a heading's body from API.md).
	text, body string
	// comments: every // comment removed (to the end of its line; in a
	// body the page flattened into one line, to the next key's quote).
	comments bool
	// trailingCommas: a comma before } or ] removed.
	trailingCommas bool
	edits          []seedEdit
	repair         string // why the edits: what is not JSON in text
	variant        string // what this request changes of the page's, and why
	// waitFor: before sending, wait until logical cloud lc-1 is in this state.
	waitFor string
	status  int
	want    map[string]string // slash paths of the answer → JSON values
	field   string            // a 4xx's field
	says    string            // a 4xx's message contains this
	// pending names the work the status waits on (another branch).
	pending    string
	outOfScope string
}

// usersWork is issue 32's users of an existing logical cloud (branch
// fix/users32): added by seed 002's POST, the last one kept. Before it, a
// user could not be added (409), DELETE .../users took every user (204)
// and the single user's DELETE was then 404, and line 70's path was
// refused naming user[0].certificate.
const usersWork = "users added to and removed from an existing logical cloud (issue 32, branch fix/users32)"

// Why the repairs.
const (
	whyComments = "the page annotates its JSON with // comments; JSON has none"
	whyFlat     = "the page flattened the block into one line, so its comments run to the next key, and it leaves out commas"
)

// seedRequests are the seeds' requests in their pages' order: seed 000's
// (its §7.2 calls by seed 001's URLs, seed 001 being the later version of
// that section, where 000 has them), seed 002's, seed 004's; seed 000's
// DELETE of the logical cloud last, the sections after its heading acting
// on the logical cloud. Before them the test registers what the pages
// assume exists: project proj1, cluster provider edge and its clusters c1
// (labels abc, xyz) and c2 (abc), two test clusters.
var seedRequests = []seedRequest{
	// Seed 000.
	{seed: "000", line: 104, method: "POST", url: "/v2/projects/<project-name>/logical-clouds", text: seed000Line106,
		comments: true, repair: whyComments, status: 201,
		want: map[string]string{"name": `"lc-1"`, "logical-cloud-name": `"lc-1"`, "namespace": `"ns-1"`, "user-name": `"user-1"`}},
	{seed: "000", line: 117, method: "POST", url: "/v2/projects/<project-name>/logical-clouds", text: seed000Line106,
		comments: true, repair: whyComments,
		edits:   []seedEdit{{from: `"type" : "certificate"`, to: `"type" : "Token"`}, {from: `"name": "lc-1"`, to: `"name": "lc-token"`}, {from: `"ns-1"`, to: `"ns-token"`}},
		variant: `the type as line 117's comment spells it ("Token"), in a logical cloud of its own (lc-token, ns-token)`, status: 201,
		want: map[string]string{"name": `"lc-token"`, "logical-cloud/spec/user/type": `"token"`}},
	{seed: "000", line: 142, method: "PUT", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>", via: "API.md (the page shows the heading only)",
		body:   `{"metadata": {"name": "lc-1", "description": "logical cloud for walmart payroll"}}`,
		status: 200, want: map[string]string{"metadata/description": `"logical cloud for walmart payroll"`, "spec/namespace": `"ns-1"`}},
	{seed: "000", line: 144, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>", via: "API.md (the page shows the heading only)",
		status: 200, want: map[string]string{"metadata/name": `"lc-1"`, "spec/user/user-name": `"user-1"`}},
	// §7.2: "this API is called multiple times"; seed 001's GET answer
	// shows c1 and c2.
	{seed: "000", line: 149, method: "POST", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-providers/<cluster-provider-name>/cluster-references",
		via: "API.md (the page shows the heading only)", body: `{"cluster-name": "c1", "loadbalancer-ip": "0.0.0.0"}`,
		status: 201, want: map[string]string{"cluster-name": `"c1"`, "cluster-provider": `"edge"`}},
	{seed: "000", line: 149, method: "POST", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-providers/<cluster-provider-name>/cluster-references",
		via: "API.md (the page shows the heading only)", body: `{"cluster-name": "c2"}`,
		status: 201, want: map[string]string{"cluster-name": `"c2"`}},
	// The page's URL ends in a literal "cluster-name" where the other
	// URLs have <cluster-name>; its answer names a cluster: read as c1.
	{seed: "001", line: 45, method: "PUT", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-providers/<cluster-provider-name>/cluster-references/cluster-name",
		names: map[string]string{"/cluster-name": "/c1"}, text: seed001Line47, comments: true, repair: whyComments,
		status: 200, want: map[string]string{"cluster-name": `"c1"`, "loadbalancer-ip": `"0.0.0.0"`}},
	{seed: "001", line: 64, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-providers/<cluster-provider-name>/cluster-references/",
		status: 200, want: map[string]string{"cluster-references/0/cluster-name": `"c1"`, "cluster-references/0/loadbalancer-ip": `"0.0.0.0"`,
			"cluster-references/1/cluster-name": `"c2"`}},
	{seed: "001", line: 83, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-providers/<cluster-provider-name>/cluster-references/<cluster-name>",
		names: map[string]string{"<cluster-name>": "c2"}, status: 204},
	// §7.3; the body is the page's GO API sample (line 87) in API.md's shape.
	{seed: "000", line: 158, method: "POST", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/user-permissions", via: "API.md; body from line 87",
		body:   `{"permission-name": "permission-3", "apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]}`,
		status: 201, want: map[string]string{"permission-name": `"permission-3"`, "namespace": `"ns-1"`}},
	{seed: "000", line: 160, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/user-permissions/permission-3", via: "API.md (the page shows the heading only)",
		status: 200, want: map[string]string{"verbs": `["get","watch","list","create"]`}},
	{seed: "000", line: 162, method: "PUT", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/user-permissions/permission-3", via: "API.md; body from line 88",
		body:   `{"permission-name": "permission-3", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}`,
		status: 200, want: map[string]string{"resources": `["configmaps"]`, "verbs": `["*"]`}},
	{seed: "000", line: 164, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/user-permissions/permission-3", via: "API.md (the page shows the heading only)",
		status: 204},
	// §7.4.
	{seed: "000", line: 168, method: "POST", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-quotas", via: "API.md; values from seed 002 line 37",
		body:   `{"metadata": {"name": "quota-1"}, "spec": {"cpu": "400", "memory": "1000Gi", "pods": "500"}}`,
		status: 201, want: map[string]string{"metadata/name": `"quota-1"`, "spec/memory": `"1000Gi"`}},
	{seed: "000", line: 170, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-quotas/quota-1", via: "API.md (the page shows the heading only)",
		status: 200, want: map[string]string{"spec/pods": `"500"`}},
	{seed: "000", line: 172, method: "PUT", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-quotas/quota-1", via: "API.md (the page shows the heading only)",
		body:   `{"metadata": {"name": "quota-1"}, "spec": {"cpu": "200", "memory": "500Gi", "pods": "100"}}`,
		status: 200, want: map[string]string{"spec/cpu": `"200"`}},
	// The page's heading says Delete, its caption "Update".
	{seed: "000", line: 173, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-quotas/quota-1", via: "API.md (the page shows the heading only)",
		status: 204},
	// §7.5.
	{seed: "000", line: 177, method: "POST", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/kv-pairs", via: "API.md; shape from line 78 (createKVpair)",
		body:   `{"metadata": {"name": "kv1", "description": "settings", "userData1": "<user data>"}, "spec": {"kv": [{"key1": "value1"}]}}`,
		status: 201, want: map[string]string{"spec/kv": `[{"key1":"value1"}]`}},
	{seed: "000", line: 179, method: "PUT", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/kv-pairs/kv1", via: "API.md (the page shows the heading only)",
		body:   `{"metadata": {"name": "kv1"}, "spec": {"kv": [{"key1": "value2"}]}}`,
		status: 200, want: map[string]string{"spec/kv": `[{"key1":"value2"}]`}},
	{seed: "000", line: 181, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/kv-pairs/kv1", via: "API.md (the page shows the heading only)",
		status: 200, want: map[string]string{"metadata/name": `"kv1"`}},
	{seed: "000", line: 183, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/kv-pairs/kv1", via: "API.md (the page shows the heading only)",
		status: 204},
	// §7.6 comes before §7.7's apply: nothing is issued yet.
	{seed: "000", line: 189, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/cluster-references/c1/kubeconfig", via: "API.md (the page shows the heading only)",
		status: 409, says: "lc-1"},
	{seed: "000", line: 192, method: "POST", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/apply", via: "API.md (the page shows the heading only)",
		status: 202, want: map[string]string{"logical-cloud": `"lc-1"`}},
	{seed: "000", line: 195, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>/status", via: "API.md (the page shows the heading only)",
		waitFor: "Instantiated", status: 200, want: map[string]string{"state": `"Instantiated"`, "clusters/0/cluster-name": `"c1"`}},

	// Seed 002.
	{seed: "002", line: 37, method: "POST", url: "/v2/projects/<project-name>/logical-clouds", text: seed002Line37, comments: true, trailingCommas: true,
		edits: flatEdits(
			closeUser),
		repair: whyFlat + ", and closes the user object after the list", status: 400, field: "user[0].certificate", says: "path"},
	{seed: "002", line: 37, method: "POST", url: "/v2/projects/<project-name>/logical-clouds", text: seed002Line37, comments: true, trailingCommas: true,
		edits: flatEdits(
			closeUser,
			seedEdit{from: `"certificate" : "/path/to/user1/logical cloud-1-user1.csr" ,`, to: ``}),
		repair:  whyFlat + ", and closes the user object after the list",
		variant: "without the certificate: the page gives a path on the client's machine, which the server cannot read (the row before); DCM then makes the user's key and CSR itself",
		status:  201, want: map[string]string{"name": `"logical-cloud-1"`, "user": `"user-1"`}},
	{seed: "002", line: 53, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<name>/users",
		status: 200, want: map[string]string{"users/0/name": `"user-1"`, "users/0/type": `"certificate"`}},
	// A logical cloud keeps at least one user: its last goes with it.
	{seed: "002", line: 53, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<name>/users",
		status: 409, says: "keeps at least one user", pending: usersWork},
	{seed: "002", line: 53, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<name>/user/<user-name>",
		status: 409, says: "is the last user", pending: usersWork},
	{seed: "002", line: 59, method: "GET", url: "/v2/projects/<project-name>/logical-clouds/<name>/namespaces",
		status: 200, want: map[string]string{"namespaces/0/name": `"logical-cloud-1"`}},
	{seed: "002", line: 59, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<name>/namespaces", status: 204},
	{seed: "002", line: 64, method: "GET", url: "/v1/cadist/projects/{project-name}/logicalclouds/{logicalcloud-name}/clusters/{cluster-name}",
		names: map[string]string{"{cluster-name}": "c1"}, status: 404, says: "its service mesh is not applied there"},
	{seed: "002", line: 67, method: "POST", url: "/v2/projects/<project-name>/logical-clouds/control-plane", text: seed002Line67, comments: true, trailingCommas: true,
		edits:  flatEdits(certChainColon),
		repair: whyFlat + `, and the colon after "cert-chain"`, status: 409, says: "exists"},
	// The page's curl sends the same file to .../logical-clouds.
	{seed: "002", line: 67, method: "POST", url: "/v2/projects/<project-name>/logical-clouds", via: "the line's curl command (-d @create_logical_cloud-1-user-2.json)",
		text: seed002Line67, comments: true, trailingCommas: true,
		edits:  flatEdits(certChainColon),
		repair: whyFlat + `, and the colon after "cert-chain"`, status: 400, field: "namespace", says: "unknown field"},
	{seed: "002", line: 70, method: "POST", url: "/v2/projects/<project-name>/logical-clouds", text: seed002Line70, comments: true, trailingCommas: true,
		edits:  flatEdits(),
		repair: whyFlat, status: 400, field: "user.certificate", says: "path", pending: usersWork},
	{seed: "002", line: 70, method: "POST", url: "/v2/projects/<project-name>/logical-clouds", text: seed002Line70, comments: true, trailingCommas: true,
		edits: flatEdits(
			seedEdit{from: `"certificate" : "/path/to/user2/logical cloud-1-user2.csr" ,`, to: ``}),
		repair:  whyFlat,
		variant: "without the certificate path (as line 37's variant): a new user added to the existing logical cloud",
		pending: usersWork,
		status:  201, want: map[string]string{"name": `"logical-cloud-1"`, "user": `"user-2"`}},
	{seed: "002", line: 117, method: "POST", url: "http://NODE_IP:30280/api/multicloud-k8s/v1/v1/tenant",
		outOfScope: "the multicloud-k8s plugin's tenant API of the original system (the page's own section is marked incomplete); API.md has no such URL: DCM's logical clouds are its tenants"},

	// Seed 004.
	{seed: "004", line: 76, method: "GET", url: "/v2/project/{project-name}/rb/{rb-name}/{version}/intent/{intent-name}/connectivity/intercluster/",
		via: "the page's URL table gives no method: GET, the collection", status: 404, says: "john"},
	{seed: "004", line: 77, method: "GET", url: "/v2/project/{project-name}/rb/{rb-name}/{version}/intent/{intent-name}/connectivity/external/outbound/",
		via: "the page's URL table gives no method: GET, the collection", status: 404, says: "john"},
	{seed: "004", line: 78, method: "GET", url: "/v2/project/{project-name}/rb/{rb-name}/{version}/intent/{intent-name}/connectivity/intracluster/",
		via: "the page's URL table gives no method: GET, the collection", status: 404, says: "john"},
	{seed: "004", line: 79, method: "GET", url: "/v2/project/{project-name}/rb/{rb-name}/{version}/intent/{intent-name}/connectivity/external/inbound/",
		via: "the page's URL table gives no method: GET, the collection", status: 404, says: "john"},
	{seed: "004", line: 80, method: "POST", url: "/v2/project/{project-name}/rb/{rb-name}/{rb-version}/traffic-intent-groups/", text: seed004Line82,
		status: 201, want: map[string]string{"name": `"john"`, "description": `"Traffic intent groups"`, "logical-cloud": `""`}},
	{seed: "004", line: 92, method: "POST", url: "/v2/project/{project-name}/rb/{rb-name}/{rb-version}/traffic-intent-sets/{trafficset-name}/interclusterservice/",
		text: seed004Line95, comments: true, trailingCommas: true,
		edits: []seedEdit{
			{from: `"name": "johndoe" `, to: `"name": "johndoe", `},
			{from: `and clusters" `, to: `and clusters", `},
			{from: `"inboundservicename": "sleep01" `, to: `"inboundservicename": "sleep01", `},
			{from: `"serviceaccounts": [] `, to: `"serviceaccounts": [], `}},
		repair: whyComments + "; commas missing after four values, two trailing", status: 201},
	{seed: "004", line: 93, method: "POST", url: "/v2/project/{project-name}/rb/{rb-name}/{rb-version}/traffic-intent-groups/{trafficgroup-name}/interclusterservice/{intercluster-record}/clientservice",
		outOfScope: "commented out in the page (a // line); API.md has no clientservice sub-resource: an inter-cluster intent lists its clientServices"},
	{seed: "004", line: 144, method: "POST", url: "/v2/project/{project-name}/rb/{rb-name}/{rb-version}/traffic-intent-groups/{trafficgroup-name}/externaloutboundaccess/",
		text: seed004Line146, comments: true,
		edits: []seedEdit{
			{from: `and clusters"`, to: `and clusters",`},
			{from: `"microservice01": `, to: `"microservice01": {`},
			{from: "}, { \n\t\t\"microservice02\":", to: "}}, { \n\t\t\"microservice02\": {"},
			{from: `"review.gerrit.com" `, to: `"review.gerrit.com", `},
			{from: "\t  }\n\t]", to: "\t  }}\n\t]"}},
		repair: whyComments + `; a comma missing after "description" and after "review.gerrit.com"; each "microservice0N": key's fields put in an object, the page's one-key form (docs/traffic.md)`,
		status: 201},
	{seed: "004", line: 200, method: "POST", url: "/v2/project/{project-name}/rb/{rb-name}/{rb-version}/traffic-intent-groups/{trafficgroup-name}/intraclusterservice/",
		text: seed004Line202, comments: true,
		edits: []seedEdit{
			{from: `and clusters"`, to: `and clusters",`},
			{from: `"microservice01": `, to: `"microservice01": {`},
			{from: "\t\t}\n}", to: "\t\t}}]\n}"}},
		repair: whyComments + `; a comma missing after "description"; the "microservice01": key's fields put in an object and the list closed`,
		status: 400, field: "type:", says: "unknown field"},
	{seed: "004", line: 359, method: "POST", url: "/v2/project/{project-name}/rb/{rb-name}/{version}/intent/{intent-name}/connectivity/dnsproviders",
		text: seed004Line361, comments: true,
		edits: []seedEdit{
			{from: `(?m)("[^"]*"\s*,?)[ \t]+When using the AWS provider.*$`, to: `$1`, re: true},
			{from: "}\n      providerCredentials: {\n        ...\n      }", to: "},\n      \"providerCredentials\": {}"}},
		repair: whyComments + "; the explanations after each externalDnsParameters value are comments without //; " +
			`providerCredentials' key unquoted, its "..." elided content, and the comma before it`,
		status: 400, field: "dnsProvider[0].externalDnsParameters.aws-api-retries", says: "only rfc2136"},

	// Seed 000 §7.1.4, last.
	{seed: "000", line: 146, method: "DELETE", url: "/v2/projects/<project-name>/logical-clouds/<logical-cloud-name>", via: "API.md (the page shows the heading only)",
		status: 409, says: "terminate"},
}

// Seed 002's other slips: line 37 closes its user list before the user
// object, line 67 leaves out the colon after "cert-chain".
var (
	closeUser      = seedEdit{from: `"dummy/dummyResource": 20 }] } }`, to: `"dummy/dummyResource": 20 } }] }`}
	certChainColon = seedEdit{from: `"cert-chain" "" "user"`, to: `"cert-chain": "", "user"`}
)

// flatEdits are the commas seed 002's flat bodies leave out in their
// permissions, and more.
func flatEdits(more ...seedEdit) []seedEdit {
	return append([]seedEdit{
		{from: `["stable.example.com"] "resources"`, to: `["stable.example.com"], "resources"`},
		{from: `["secrets", "pods"] "verbs"`, to: `["secrets", "pods"], "verbs"`},
	}, more...)
}

// seedBody is r's body as sent: its text repaired, or its body.
func seedBody(t testing.TB, r seedRequest) string {
	t.Helper()
	if r.text == "" {
		return r.body
	}
	s := r.text
	if r.comments {
		if strings.Contains(s, "\n") {
			s = regexp.MustCompile(`(?m)//.*$`).ReplaceAllString(s, "")
		} else {
			s = regexp.MustCompile(`//[^"]*`).ReplaceAllString(s, "")
		}
	}
	for _, e := range r.edits {
		if e.re {
			re := regexp.MustCompile(e.from)
			require.True(t, re.MatchString(s), "%s:%d: edit %q matches nothing", r.seed, r.line, e.from)
			s = re.ReplaceAllString(s, e.to)
			continue
		}
		require.Equal(t, 1, strings.Count(s, e.from), "%s:%d: edit %q", r.seed, r.line, e.from)
		s = strings.Replace(s, e.from, e.to, 1)
	}
	if r.trailingCommas {
		s = regexp.MustCompile(`,(\s*[}\]])`).ReplaceAllString(s, "$1")
	}
	return s
}

// TestSeedBodiesRepaired: a body sent as the page writes it is JSON; one
// repaired was not JSON as written and is JSON repaired, and every
// repair is said.
func TestSeedBodiesRepaired(t *testing.T) {
	t.Parallel()
	for _, r := range seedRequests {
		if r.text == "" {
			continue
		}
		body := seedBody(t, r)
		require.True(t, json.Valid([]byte(body)), "%s:%d: not JSON after the repairs:\n%s", r.seed, r.line, body)
		repaired := r.comments || r.trailingCommas || len(r.edits) > 0
		require.Equal(t, repaired, r.repair != "", "%s:%d: a repair is said exactly when there is one", r.seed, r.line)
		if r.repair != "" && r.variant == "" {
			require.False(t, json.Valid([]byte(r.text)), "%s:%d: repaired though it is JSON", r.seed, r.line)
		}
	}
}

// TestSeedRequestsReplay sends seedRequests in order against the whole
// program with two real (node-less) test clusters and checks each answer:
// its status, the key fields, and a 4xx's field and message. A request
// whose work is on another branch (pending) is checked all the same: it
// fails, saying what it waits on, until that work is here.
func TestSeedRequestsReplay(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"proj1"}}`)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	for i, c := range []struct{ name, labels string }{{"c1", `["abc","xyz"]`}, {"c2", `["abc"]`}} {
		body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": c.name},
			"spec": map[string]any{"kubeconfig": string(h.Clusters[i].Kubeconfig), "labels": json.RawMessage(c.labels)}})
		require.NoError(t, err)
		r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	}
	var sent, outOfScope int
	var pending []string
	for _, q := range seedRequests {
		name := fmt.Sprintf("%s:%d %s %s", q.seed, q.line, q.method, q.url)
		if q.outOfScope != "" {
			outOfScope++
			t.Logf("%s: out of scope: %s", name, q.outOfScope)
			continue
		}
		sent++
		path := q.url
		for k, v := range q.names {
			path = strings.ReplaceAll(path, k, v)
		}
		for k, v := range seedNames {
			path = strings.ReplaceAll(path, k, v)
		}
		require.NotContains(t, path, "<", name)
		require.NotContains(t, path, "{", name)
		if q.waitFor != "" {
			waitEMCOState(t, s, "/v2/projects/proj1/logical-clouds/lc-1", q.waitFor)
		}
		code, got := apitest.Call(t, s.Admin, q.method, s.URL+path, seedBody(t, q))
		t.Logf("%s → %d %.300s", name, code, got)
		ok := t.Run(strconv.Itoa(q.line)+"_"+q.seed, func(t *testing.T) {
			require.Equal(t, q.status, code, "%s: %s (waits on: %s)", name, got, q.pending)
			if code == 204 {
				return
			}
			var doc any
			require.NoError(t, json.Unmarshal(got, &doc), "%s: %s", name, got)
			for p, want := range q.want {
				v, found := jsonAt(doc, p)
				require.True(t, found, "%s: no %s in %s", name, p, got)
				b, err := json.Marshal(v)
				require.NoError(t, err)
				require.JSONEq(t, want, string(b), "%s: %s in %s", name, p, got)
			}
			if code >= 400 {
				m, _ := doc.(map[string]any)
				msg, _ := m["message"].(string)
				require.NotEmpty(t, msg, "%s: a 4xx says why: %s", name, got)
				if q.field != "" {
					require.Equal(t, q.field, m["field"], "%s: %s", name, got)
				}
				require.Contains(t, msg, q.says, "%s", name)
			}
		})
		switch {
		case !ok && q.pending != "":
			pending = append(pending, fmt.Sprintf("%s answered %d %.200s: it waits on %s", name, code, got, q.pending))
		case !ok:
			t.Logf("failed: %s", name)
		}
	}
	// Beyond the pages: a page's text sent unrepaired is a 400 that says
	// where it stops being JSON.
	body := r.Want(400, "POST", "/v2/projects/proj1/logical-clouds", seed000Line106)
	t.Logf("seed 000's body as written → 400 %s", body)
	require.Contains(t, body, `"field":"body"`)
	require.Contains(t, body, "(line 3, column 17)")
	// Seed 004's group names no logical cloud, so it
	// cannot be applied until it is given one (once, by PUT).
	group := "/v2/project/proj1/rb/rb1/v1/traffic-intent-groups/john"
	body = r.Want(409, "POST", group+"/apply", "")
	require.Contains(t, body, `"reason":"WRONG_STATE"`)
	require.Contains(t, body, "names no logical cloud: set its logical-cloud")
	// Terminate is refused as for any group never applied.
	require.Contains(t, r.Want(409, "POST", group+"/terminate", ""), `is Created: terminate needs it to be`)
	r.Is(200, "PUT", group, `{"name": "john", "description": "Traffic intent groups", "logical-cloud": "lc-1"}`,
		`{"metadata":{"name":"john","description":"Traffic intent groups","userData1":"","userData2":""},"name":"john","description":"Traffic intent groups","logical-cloud":"lc-1","applied":false,"rollout":null}`)
	require.Contains(t, r.Want(200, "GET", group+"/status", ""), `"logical-cloud":"lc-1"`)
	require.Contains(t, r.Want(400, "PUT", group, `{"logical-cloud": "lc-token"}`), "never changes")
	r.Want(204, "DELETE", group, "")
	// Seed 000's kubeconfig (line 189), asked again now that lc-1 is
	// applied: the user's, in its namespace.
	kc := r.Want(200, "GET", "/v2/projects/proj1/logical-clouds/lc-1/cluster-references/c1/kubeconfig", "")
	require.Contains(t, kc, "namespace: ns-1")
	require.Contains(t, kc, "client-certificate-data")
	// What seed 000's DELETE asked for, as the 409 says: terminate first.
	lc := "/v2/projects/proj1/logical-clouds/lc-1"
	r.Want(202, "POST", lc+"/terminate", "")
	waitEMCOState(t, s, lc, "Terminated")
	r.Want(204, "DELETE", lc, "")

	for _, p := range pending {
		t.Logf("PENDING: %s", p)
	}
	t.Logf("seed requests: %d sent, %d out of scope, %d failed waiting on other work", sent, outOfScope, len(pending))
}

// jsonAt is the value at a slash path of a decoded JSON document.
func jsonAt(doc any, path string) (any, bool) {
	for _, k := range strings.Split(path, "/") {
		switch n := doc.(type) {
		case map[string]any:
			v, ok := n[k]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			doc = n[i]
		default:
			return nil, false
		}
	}
	return doc, true
}
