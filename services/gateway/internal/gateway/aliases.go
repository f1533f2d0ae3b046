package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// The traffic controller's seed (004) writes a traffic intent group's URLs
// several ways, and API.md serves them all. The contracts bind each method
// once, under /v2/projects/{project}/rb/{composite_app}/{version}/traffic-intent-groups
// (proto/dcm/traffic/v1/service.proto, proto/dcm/core/v1/traffic.proto);
// aliases rewrites the other spellings onto those URLs before the
// router sees them, so that each is not a generated route of its own:
//
//	/v2/project/...                                → /v2/projects/...
//	.../{version}/traffic-intent-sets/...          → .../{version}/traffic-intent-groups/...
//	.../{version}/intent/{group}/connectivity/intercluster      → .../traffic-intent-groups/{group}/interclusterservice
//	.../{version}/intent/{group}/connectivity/intracluster      → .../intraclusterservice
//	.../{version}/intent/{group}/connectivity/external/outbound → .../externaloutboundaccess
//	.../{version}/intent/{group}/connectivity/external/inbound  → .../externalinboundaccess
//	.../{version}/intent/{group}/connectivity/dnsproviders      → .../dnsproviders
//
// each followed by whatever the URL goes on with ("/{name}", "/apply",
// "/status"). The seeds also write collection and item URLs with a
// trailing slash (seed 001's GET .../cluster-references/, seed 004's
// POST .../traffic-intent-groups/): one trailing slash is dropped from
// every path first (canonicalPath), so every route, in either dialect,
// answers its URL with and without it. Only paths under .../rb/... are
// aliased; a literal segment is
// compared decoded, as the router compares it, so a percent-encoded
// spelling is rewritten as the plain one is (an encoded '/' is refused
// before this, by secure). Authorization, the audit's route and the
// answer are the canonical route's; the audit's object is the path sent.

// intentAliases are the intent-style collection names: the segments after
// connectivity/, and the collection under traffic-intent-groups/{group}/.
var intentAliases = []struct {
	from []string
	to   string
}{
	{[]string{"intercluster"}, "interclusterservice"},
	{[]string{"intracluster"}, "intraclusterservice"},
	{[]string{"external", "outbound"}, "externaloutboundaccess"},
	{[]string{"external", "inbound"}, "externalinboundaccess"},
	{[]string{"dnsproviders"}, "dnsproviders"},
}

// aliases serves next the request with its path rewritten onto the
// canonical spelling (canonicalPath), or as it is.
func aliases(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := canonicalPath(r.URL.EscapedPath())
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		plain, err := url.PathUnescape(p)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		u := *r.URL
		u.Path, u.RawPath = plain, ""
		if r.URL.RawPath != "" {
			u.RawPath = p
		}
		r2 := r.WithContext(context.WithValue(r.Context(), sentPathKey{}, r.URL.Path))
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}

// sentPathKey holds the path a request sent, when aliases rewrote
// it: a 404 or 405 names the URL the client sent.
type sentPathKey struct{}

// sentPath is the path r was sent with.
func sentPath(r *http.Request) string {
	if p, ok := r.Context().Value(sentPathKey{}).(string); ok {
		return p
	}
	return r.URL.Path
}

// canonicalPath is escaped, a URL's escaped path, without one trailing
// slash ("/" itself stays) and in the spelling the contracts bind
// (canonicalTrafficPath), and whether that differs from it.
func canonicalPath(escaped string) (string, bool) {
	trimmed := false
	if len(escaped) > 1 && strings.HasSuffix(escaped, "/") {
		escaped, trimmed = escaped[:len(escaped)-1], true
	}
	if p, ok := canonicalTrafficPath(escaped); ok {
		return p, true
	}
	return escaped, trimmed
}

// canonicalTrafficPath is escaped, a URL's escaped path, in the spelling
// the contracts bind, and whether that differs from it.
func canonicalTrafficPath(escaped string) (string, bool) {
	segs := strings.Split(escaped, "/")
	lit := func(i int) string {
		if i >= len(segs) {
			return ""
		}
		s, err := url.PathUnescape(segs[i])
		if err != nil {
			return ""
		}
		return s
	}
	// "", v2, project(s), {project}, rb, {composite_app}, {version}, collection, ...
	if len(segs) < 8 || segs[0] != "" || lit(1) != "v2" || lit(4) != "rb" {
		return "", false
	}
	changed := false
	switch lit(2) {
	case "projects":
	case "project":
		segs[2], changed = "projects", true
	default:
		return "", false
	}
	switch lit(7) {
	case "traffic-intent-sets":
		segs[7], changed = "traffic-intent-groups", true
	case "intent":
		// intent, {group}, connectivity, the kind's one or two segments.
		if lit(9) != "connectivity" {
			break
		}
		for _, a := range intentAliases {
			n := len(a.from)
			match := len(segs) >= 10+n
			for i := 0; match && i < n; i++ {
				match = lit(10+i) == a.from[i]
			}
			if match {
				rest := segs[10+n:]
				segs = append(append(segs[:7:7], "traffic-intent-groups", segs[8], a.to), rest...)
				changed = true
				break
			}
		}
	}
	if !changed {
		return "", false
	}
	return strings.Join(segs, "/"), true
}
