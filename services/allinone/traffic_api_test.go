package allinone_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// Seed 004's example bodies, made valid JSON: comments removed, commas
// added, the intra-cluster example's "type:" written "type" (it then holds
// "type" twice: the last one counts).
const (
	seedIntercluster = `{
	"name": "johndoe",
	"description": "connectivity intent for microservice replication across multiple locations and clusters",
	"inboundservicename": "sleep01",
	"protocol": "HTTP",
	"externalPrefix": "httpservice01",
	"headless": "false",
	"mutualTLS": "true",
	"port": "80",
	"serviceMesh": "istio",
	"loadbalancing": "true",
	"serviceaccounts": [],
	"clientServices": [
		{"clientServiceName": "httpbin02", "headless": "false", "egressgateway": "true"},
		{"clientServiceName": "httpbin03", "headless": "false", "egressgateway": "true"}
	]
}`
	seedOutbound = `{
	"description": "connectivity intent for microservice replication across multiple locations and clusters",
	"connectivityResource": [
		{"microservice01": {
			"name": "httpbin01", "application": "bookinfo", "egressgateway": "true", "externalPrefix": "",
			"mutualTLS": "true", "port": "80", "serviceMesh": "istio",
			"clientServices": [
				{"clientServiceName": "mongo.k8s.com", "protocol": "HTTP", "type": "external"},
				{"clientServiceName": "newsfeed.news.com", "protocol": "HTTP", "type": "external"}
			]}},
		{"microservice02": {
			"name": "httpbin01", "application": "bookinfo", "egressgateway": "true", "externalPrefix": "",
			"mutualTLS": "true", "port": "80", "serviceMesh": "istio",
			"clientServices": [
				{"clientServiceName": "google.com", "protocol": "HTTP", "type": "external"},
				{"clientServiceName": "review.gerrit.com", "protocol": "HTTP", "type": "external"}
			]}}
	]
}`
	seedIntracluster = `{
	"description": "connectivity intent for microservice replication across multiple locations and clusters",
	"connectivityResource": [
		{"microservice01": {
			"name": "httpbin01", "application": "bookinfo", "egressgateway": "true", "externalPrefix": "httpservice01",
			"mutualTLS": "true", "port": "80", "serviceMesh": "istio",
			"clientServices": [
				{"clientServiceName": "httpbin02", "protocol": "HTTP", "headless": "false", "type": "intracluster"},
				{"clientServiceName": "httpbin03", "protocol": "HTTP", "type": "kubernetes", "headless": "false", "type": "intracluster"}
			]}}
	]
}`
	seedDNSAWS = `{
	"description": "dns provider intent for updating user facing microservice FQDNs to external DNS providers",
	"dnsProvider": [{
		"id": "microservice01",
		"externalName": "service1.example.com",
		"cluster-selector": "label1, label2",
		"externalDnsParameters": {
			"aws-zone-type": "", "aws-zone-tags": "", "aws-assume-role": "", "aws-batch-change-size": "1000",
			"aws-batch-change-interval": "1s", "aws-evaluate-target-health": "enabled", "aws-api-retries": "3",
			"aws-prefer-cname": "disabled"
		},
		"providerCredentials": {}
	}]
}`
	inbound = `{"connectivityResource": [{"microservice01": {"name": "httpbin01", "port": 80, "externalPrefix": "service1", "domain": "example.com"}}]}`
	// tsigSecret must never be answered nor logged.
	tsigSecret = "dGhpcy1pcy1hLXRzaWctc2VjcmV0"
	dnsRFC2136 = `{"dnsProvider": [{"id": "microservice01", "externalName": "service1.example.com", "cluster-selector": "edge",
		"externalDnsParameters": {"rfc2136-host": "192.0.2.53", "rfc2136-port": "53", "rfc2136-zone": "example.com",
			"rfc2136-tsig-keyname": "dcm", "rfc2136-tsig-secret-alg": "hmac-sha256"},
		"providerCredentials": {"rfc2136-tsig-secret": "` + tsigSecret + `"}}]}`
)

// TestTrafficAPI is the traffic controller's REST API through the whole
// program: the seed's bodies in both URL spellings, read back through the
// other, the refusals (each naming its field, storing nothing), DNS
// credentials never answered nor logged, and project isolation.
func TestTrafficAPI(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	s := stacktest.StartWith(t, stacktest.Options{Logs: logs, Args: []string{"-log-level", "debug"}})
	r := apitest.NewREST(t, s)
	for _, p := range []string{"a", "b"} {
		r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"`+p+`"}}`)
		r.Want(201, "POST", "/v2/projects/"+p+"/logical-clouds", `{"metadata":{"name":"lc-`+p+`"}}`)
	}
	const (
		old = "/v2/project/a/rb/app/v1"  // the seed's spelling
		new = "/v2/projects/a/rb/app/v1" // DCM's
	)
	field := func(code int, method, path, body string) string {
		t.Helper()
		f, _ := decodeMap(t, r.Want(code, method, path, body))["field"].(string)
		return f
	}
	// count is the length of a list answer (a JSON array).
	count := func(path string) int {
		t.Helper()
		items, ok := decode(t, []byte(r.Want(200, "GET", path, ""))).([]any)
		require.True(t, ok, path)
		return len(items)
	}

	// Groups: the logical cloud must be one of the URL's project.
	require.Equal(t, "logical-cloud", field(400, "POST", old+"/traffic-intent-groups", `{"name":"g","logical-cloud":"nope"}`))
	require.Contains(t, r.Want(400, "POST", old+"/traffic-intent-groups", `{"name":"g","logical-cloud":"lc-b"}`), `not a logical cloud of project \"a\"`)
	require.Equal(t, "name", field(400, "POST", old+"/traffic-intent-groups", `{"name":"g","metadata":{"name":"h"},"logical-cloud":"lc-a"}`))
	r.Want(201, "POST", old+"/traffic-intent-groups", `{"name":"g","description":"Traffic intent groups","logical-cloud":"lc-a","applied":true}`)
	g := decodeMap(t, r.Want(200, "GET", new+"/traffic-intent-sets/g", ""))
	require.Equal(t, "g", g["metadata"].(map[string]any)["name"])
	require.Equal(t, "Traffic intent groups", g["description"])
	require.Equal(t, false, g["applied"], "output only")
	require.Equal(t, 1, count(new+"/traffic-intent-groups"))

	// The seed's bodies, posted in one spelling and read in the other.
	r.Want(201, "POST", old+"/traffic-intent-groups/g/intraclusterservice", seedIntracluster)
	ic := decodeMap(t, r.Want(200, "GET", new+"/intent/g/connectivity/intracluster/microservice01", ""))
	res := ic["connectivityResource"].([]any)[0].(map[string]any)
	require.Equal(t, "microservice01", res["id"])
	require.Equal(t, true, res["mutualTLS"])
	require.EqualValues(t, 80, res["port"])
	cs := res["clientServices"].([]any)
	require.Len(t, cs, 2)
	require.Equal(t, "intracluster", cs[1].(map[string]any)["type"])

	r.Want(201, "POST", old+"/intent/g/connectivity/intercluster", seedIntercluster)
	inter := decodeMap(t, r.Want(200, "GET", new+"/traffic-intent-groups/g/interclusterservice/johndoe", ""))
	require.Equal(t, "sleep01", inter["inboundservicename"])
	require.Equal(t, true, inter["loadbalancing"])

	r.Want(201, "POST", new+"/traffic-intent-groups/g/externaloutboundaccess", seedOutbound)
	out := decodeMap(t, r.Want(200, "GET", old+"/intent/g/connectivity/external/outbound/microservice01", ""))
	require.Len(t, out["connectivityResource"], 2)

	r.Want(201, "POST", new+"/intent/g/connectivity/external/inbound", inbound)
	r.Want(200, "GET", old+"/traffic-intent-sets/g/externalinboundaccess/microservice01", "")

	// The seed's DNS provider is AWS's: refused by this build.
	f := field(400, "POST", old+"/intent/g/connectivity/dnsproviders", seedDNSAWS)
	require.True(t, strings.HasPrefix(f, "dnsProvider[0].externalDnsParameters.aws-"), f)
	// No DNS server until an admin allows it: the project's own admin may
	// read the allow-list, not set it.
	require.Equal(t, "dnsProvider[0].externalDnsParameters.rfc2136-host", field(400, "POST", old+"/traffic-intent-groups/g/dnsproviders", dnsRFC2136))
	pa := mint(t, s, `{"subject":"pa","role":"project-admin","project":"a"}`)
	allowList := `{"servers":["192.0.2.53:53"],"zones":["example.com"]}`
	code, body := do(t, s.Client(nil), pa, "PUT", s.URL+"/v2/projects/a/dns-allow-list", allowList)
	require.Equal(t, 403, code, body)
	r.Want(404, "GET", "/v2/projects/a/dns-allow-list", "")
	al := decodeMap(t, r.Want(200, "PUT", "/v2/projects/a/dns-allow-list", allowList))
	require.Equal(t, []any{"192.0.2.53:53"}, al["servers"])
	require.NotEmpty(t, al["resourceVersion"])
	code, body = do(t, s.Client(nil), pa, "GET", s.URL+"/v2/projects/a/dns-allow-list", "")
	require.Equal(t, 200, code, body)
	require.Equal(t, 409, first(do(t, s.Client(nil), s.AdminToken, "PUT", s.URL+"/v2/projects/a/dns-allow-list",
		`{"servers":["192.0.2.53:53"],"resourceVersion":"12345"}`)), "a stale resourceVersion")
	// The project-admin: another's owner id, unsigned updates, a server or
	// zone not allowed are refused naming the field.
	for want, change := range map[string][2]string{
		"dnsProvider[0].externalDnsParameters.txt-owner-id":     {`"rfc2136-zone": "example.com",`, `"rfc2136-zone": "example.com", "txt-owner-id": "dcm-0123456789abcdef0123456789abcdef",`},
		"dnsProvider[0].externalDnsParameters.rfc2136-insecure": {`"rfc2136-zone": "example.com",`, `"rfc2136-zone": "example.com", "rfc2136-insecure": "true",`},
		"dnsProvider[0].externalDnsParameters.rfc2136-host":     {`"192.0.2.53"`, `"127.0.0.1"`},
		"dnsProvider[0].externalDnsParameters.rfc2136-zone":     {`"rfc2136-zone": "example.com"`, `"rfc2136-zone": "example.org"`},
	} {
		code, body := do(t, s.Client(nil), pa, "POST", s.URL+old+"/traffic-intent-groups/g/dnsproviders", strings.Replace(dnsRFC2136, change[0], change[1], 1))
		require.Contains(t, []int{400, 403}, code, body)
		got, _ := decodeMap(t, string(body))["field"].(string)
		require.Equal(t, want, got, body)
	}
	code, body = do(t, s.Client(nil), pa, "POST", s.URL+old+"/traffic-intent-groups/g/dnsproviders", dnsRFC2136)
	require.Equal(t, 201, code, body)
	require.Regexp(t, `"txt-owner-id":"dcm-[0-9a-f]{32}"`, body, "the derived owner id is answered")
	r.Want(204, "DELETE", old+"/traffic-intent-groups/g/dnsproviders/microservice01", "")
	r.Want(201, "POST", old+"/traffic-intent-groups/g/dnsproviders", dnsRFC2136)
	for _, path := range []string{new + "/intent/g/connectivity/dnsproviders/microservice01", old + "/traffic-intent-groups/g/dnsproviders/microservice01",
		new + "/intent/g/connectivity/dnsproviders"} {
		body := r.Want(200, "GET", path, "")
		require.NotContains(t, body, tsigSecret, path)
		require.Contains(t, body, `"credential-keys":["rfc2136-tsig-secret"]`, path)
	}
	// An update without credentials keeps them.
	r.Want(200, "PUT", new+"/intent/g/connectivity/dnsproviders/microservice01", strings.Replace(dnsRFC2136, `"rfc2136-tsig-secret": "`+tsigSecret+`"`, "", 1))
	require.Contains(t, r.Want(200, "GET", old+"/intent/g/connectivity/dnsproviders/microservice01", ""), `"credential-keys":["rfc2136-tsig-secret"]`)

	// Refusals name the field and store nothing.
	intra := new + "/intent/g/connectivity/intracluster"
	for body, want := range map[string]string{
		`{"name":"x","connectivityResource":[{"id":"m","name":"m","port":70000}]}`:                                                                  "connectivityResource[0].port",
		`{"name":"x","connectivityResource":[{"id":"m","name":"m","port":80,"clientServices":[{"clientServiceName":"c","protocol":"SMTP"}]}]}`:      "connectivityResource[0].clientServices[0].protocol",
		`{"name":"x","connectivityResource":[{"m": {"mutualTLS":"maybe"}}]}`:                                                                        "connectivityResource[0].mutualTLS",
		`{"name":"x","connectivityResource":[{"id":"m","name":"m","port":80,"clientServices":[{"clientServiceName":"c","type:":"intracluster"}]}]}`: "type:",
	} {
		require.Equal(t, want, field(400, "POST", intra, body), body)
	}
	require.Equal(t, 1, count(intra))
	outPath := old + "/traffic-intent-groups/g/externaloutboundaccess"
	require.Equal(t, "connectivityResource[0].clientServices[0].clientServiceName",
		field(400, "POST", outPath, `{"name":"y","connectivityResource":[{"id":"m","name":"m","port":80,"clientServices":[{"clientServiceName":"not_an_fqdn"}]}]}`))
	require.Equal(t, 1, count(outPath))
	require.Equal(t, 1, count(old+"/intent/g/connectivity/dnsproviders"))
	r.Want(404, "POST", new+"/intent/nope/connectivity/intracluster", `{"connectivityResource":[{"id":"m","name":"m","port":80}]}`)

	// Updates keep the name.
	require.Equal(t, "name", field(400, "PUT", intra+"/microservice01", `{"name":"other","connectivityResource":[{"id":"m","name":"m","port":80}]}`))
	r.Want(200, "PUT", old+"/traffic-intent-groups/g/intraclusterservice/microservice01", `{"description":"new","connectivityResource":[{"id":"m","name":"m","port":80,"protocol":"grpc"}]}`)
	require.Contains(t, r.Want(200, "GET", intra+"/microservice01", ""), `"protocol":"GRPC"`)

	// Another project's admin reaches none of it, in either spelling.
	tok := mint(t, s, `{"subject":"pb","role":"project-admin","project":"b"}`)
	bare := s.Client(nil)
	for _, c := range []struct{ method, path, body string }{
		{"GET", old + "/traffic-intent-groups/g", ""},
		{"GET", new + "/intent/g/connectivity/dnsproviders", ""},
		{"POST", new + "/traffic-intent-groups", `{"name":"h","logical-cloud":"lc-a"}`},
		{"DELETE", old + "/traffic-intent-sets/g", ""},
	} {
		code, body := do(t, bare, tok, c.method, s.URL+c.path, c.body)
		require.Equal(t, 403, code, "%s %s: %s", c.method, c.path, body)
	}
	code, _ = do(t, bare, tok, "GET", s.URL+"/v2/project/b/rb/app/v1/traffic-intent-groups", "")
	require.Equal(t, 200, code, "its own project")

	// Deleting the group takes its intents along.
	r.Want(204, "DELETE", old+"/intent/g/connectivity/intercluster/johndoe", "")
	r.Want(404, "GET", new+"/traffic-intent-groups/g/interclusterservice/johndoe", "")
	r.Want(204, "DELETE", new+"/traffic-intent-groups/g", "")
	r.Want(404, "GET", old+"/traffic-intent-groups/g", "")
	r.Want(201, "POST", old+"/traffic-intent-groups", `{"metadata":{"name":"g"},"logical-cloud":"lc-a"}`)
	require.Equal(t, 0, count(intra))
	require.Equal(t, 0, count(old+"/traffic-intent-groups/g/dnsproviders"))

	require.Contains(t, logs.String(), "CreateDnsProviderIntent", "the calls were logged")
	require.NotContains(t, logs.String(), tsigSecret, "credentials are never logged")
}

// The fuzzed traffic routes hang under fzTrafficApp (fz's logical cloud
// fz-lc names their group).
const (
	fzTrafficApp   = "/rb/fz-app/v1"
	fzTrafficGroup = "fz-g"
)

// trafficKinds are the intent kinds: their key, collection under a group
// and under the intent spelling, and a seed body.
var trafficKinds = []struct{ key, groupSeg, intentSeg string }{
	{"intercluster", "interclusterservice", "connectivity/intercluster"},
	{"intracluster", "intraclusterservice", "connectivity/intracluster"},
	{"outbound", "externaloutboundaccess", "connectivity/external/outbound"},
	{"inbound", "externalinboundaccess", "connectivity/external/inbound"},
	{"dns", "dnsproviders", "connectivity/dnsproviders"},
}

// trafficFuzzRoutes are the traffic controller's body routes in every
// spelling (fuzzRoutes): groups, their intents, and core's lifecycle verbs.
// Each method has one binding, under /v2/projects/.../traffic-intent-groups
// (the template); the gateway rewrites the seed's other spellings (the
// path) onto it.
func trafficFuzzRoutes() []fuzzRoute {
	var out []fuzzRoute
	tmpl := "/v2/projects/{project}/rb/{composite_app}/{version}"
	for _, root := range []string{"project", "projects"} {
		path := "/v2/" + root + "/" + fzProject + fzTrafficApp
		for _, coll := range []string{"traffic-intent-groups", "traffic-intent-sets"} {
			k := "traffic." + root + "." + coll
			const bound = "traffic-intent-groups"
			out = append(out,
				fuzzRoute{k + ".create", "POST", tmpl + "/" + bound, path + "/" + coll, under(path+"/"+coll, "name")},
				fuzzRoute{k + ".update", "PUT", tmpl + "/" + bound + "/{name}", path + "/" + coll + "/" + fzTrafficGroup, nil})
			for _, verb := range []string{"apply", "update", "terminate", "resume", "rollback"} {
				out = append(out, fuzzRoute{k + "." + verb, "POST", tmpl + "/" + bound + "/{group}/" + verb, path + "/" + coll + "/" + fzTrafficGroup + "/" + verb, nil})
			}
		}
		for _, kind := range trafficKinds {
			bound := "/traffic-intent-groups/{group}/" + kind.groupSeg
			for _, sp := range []struct{ name, tmpl, path string }{
				{"groups", bound, "/traffic-intent-groups/" + fzTrafficGroup + "/" + kind.groupSeg},
				{"sets", bound, "/traffic-intent-sets/" + fzTrafficGroup + "/" + kind.groupSeg},
				{"intent", bound, "/intent/" + fzTrafficGroup + "/" + kind.intentSeg},
			} {
				k := "traffic." + root + "." + kind.key + "." + sp.name
				out = append(out,
					fuzzRoute{k + ".create", "POST", tmpl + sp.tmpl, path + sp.path, under(path+sp.path, "name")},
					fuzzRoute{k + ".update", "PUT", tmpl + sp.tmpl + "/{name}", path + sp.path + "/fz-i", nil})
			}
		}
	}
	out = append(out, fuzzRoute{"traffic.projects.dns-allow-list.put", "PUT", "/v2/projects/{project}/dns-allow-list", "/v2/projects/" + fzProject + "/dns-allow-list", nil})
	return out
}

// trafficFuzzSeeds are seed 004's bodies (and DCM's forms) for every
// traffic route.
func trafficFuzzSeeds() []struct{ route, query, body string } {
	bodies := map[string][]string{
		"intercluster": {seedIntercluster},
		"intracluster": {seedIntracluster, `{"name":"fz-i","connectivityResource":[{"id":"m","name":"m","port":"80","protocol":"smtp"}]}`},
		"outbound":     {seedOutbound, `{"connectivityResource":[{"id":"m","name":"m","port":80,"clientServices":[{"clientServiceName":"db.example.com","protocol":"TCP"}]}]}`},
		"inbound": {inbound, `null`, `[]`, `"x"`, `{"connectivityResource":[null,{"a":null},{"a":{"b":1},"c":2},{"m":{"id":7}}]}`,
			`{"connectivityResource":[{"m":{"mutualTLS":["true"],"clientServices":[{"headless":{}}]}}]}`},
		"dns": {seedDNSAWS, dnsRFC2136, `{"dnsProvider":[{"id":"m","externalName":"a.example.com","externalDnsParameters":{"a.b":"c"},"providerCredentials":{"rfc2136-tsig-secret":""}}]}`,
			`{"dnsProvider":[{"id":"m","externalDnsParameters":null,"providerCredentials":{"x":null}},null]}`},
		"dns-allow-list": {`{"servers":["192.0.2.53:53","[2001:db8::53]:53","ns1.example.net:5353"],"zones":["example.com"],"networks":["10.0.0.0/8"]}`,
			`{"servers":["169.254.169.254:53","ns1:99999","[fe80::1%eth0]:53"],"zones":["1.2.3.4"],"networks":["0.0.0.0/0"],"resourceVersion":"x"}`},
	}
	var out []struct{ route, query, body string }
	for _, r := range trafficFuzzRoutes() {
		parts := strings.Split(r.key, ".")
		var seeds []string
		switch {
		case strings.HasPrefix(parts[2], "traffic-intent-") && (parts[3] == "create" || parts[3] == "update"):
			seeds = []string{`{"name":"fz-g2","description":"Traffic intent groups","logical-cloud":"` + fzLC + `"}`,
				`{"metadata":{"name":"fz-g"},"logical-cloud":"fz-lc","applied":"true"}`}
		case strings.HasPrefix(parts[2], "traffic-intent-"):
			seeds = []string{``}
		default:
			seeds = bodies[parts[2]]
		}
		for _, b := range seeds {
			out = append(out, struct{ route, query, body string }{r.key, "", b})
		}
	}
	return out
}
