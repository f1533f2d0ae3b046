package render

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// where names an intent in error fields: "<collection>/<intent>", the
// collection as in the group's URLs (interclusterservice...).
type where string

// field is the error field of path in the intent, e.g.
// "interclusterservice/john: clusters[0]".
func (w where) field(path string, args ...any) string {
	return string(w) + ": " + fmt.Sprintf(path, args...)
}

// collections name each kind's intents in error fields.
var collections = map[string]string{
	KindIntercluster: "interclusterservice",
	KindIntracluster: "intraclusterservice",
	KindOutbound:     "externaloutboundaccess",
	KindInbound:      "externalinboundaccess",
	KindDNS:          "dnsproviders",
}

func whereOf(kind, intent string) where { return where(collections[kind] + "/" + intent) }

// place resolves where a service runs, as indexes of b.in.Clusters in
// Input order: its clusters (each must be one of the logical cloud's),
// else the clusters with every one of labels, else all of them. path
// prefixes the fields ("", "clientServices[0].", ...).
func (b *builder) place(w where, path string, clusters []*trafficv1.TrafficCluster, labels []string) ([]int, error) {
	if len(clusters) > 0 {
		var out []int
		for i, c := range clusters {
			j := slices.IndexFunc(b.in.Clusters, func(t Target) bool {
				return t.Provider == c.GetClusterProvider() && t.Cluster == c.GetClusterName()
			})
			if j < 0 {
				return nil, errs.Invalid(w.field("%sclusters[%d]", path, i), "cluster %s/%s is not a cluster of logical cloud %s",
					c.GetClusterProvider(), c.GetClusterName(), b.in.LogicalCloud)
			}
			if !slices.Contains(out, j) {
				out = append(out, j)
			}
		}
		slices.Sort(out)
		return out, nil
	}
	if len(labels) > 0 {
		out := withLabels(b.in.Clusters, labels)
		if len(out) == 0 {
			return nil, errs.Invalid(w.field("%scluster-labels", path), "no cluster of logical cloud %s has every label of %s",
				b.in.LogicalCloud, strings.Join(labels, ", "))
		}
		return out, nil
	}
	out := make([]int, len(b.in.Clusters))
	for i := range out {
		out[i] = i
	}
	return out, nil
}

// withLabels are the indexes of the clusters carrying every label.
func withLabels(clusters []Target, labels []string) []int {
	var out []int
	for i, t := range clusters {
		if every(t.Labels, labels) {
			out = append(out, i)
		}
	}
	return out
}

func every(have, want []string) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

// union merges sorted index lists.
func union(a, b []int) []int {
	out := slices.Clone(a)
	for _, i := range b {
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// minus is a without the indexes in b.
func minus(a, b []int) []int {
	var out []int
	for _, i := range a {
		if !slices.Contains(b, i) {
			out = append(out, i)
		}
	}
	return out
}

// intersect is a's indexes that are in b.
func intersect(a, b []int) []int {
	var out []int
	for _, i := range a {
		if slices.Contains(b, i) {
			out = append(out, i)
		}
	}
	return out
}

var (
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	hostRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// checkLabel refuses a name that is not a DNS label (a Service or
// ServiceAccount name).
func checkLabel(field, name string) error {
	if len(name) > 63 || !labelRE.MatchString(name) {
		return errs.Invalid(field, "%q is not a DNS label (lower case letters, digits and '-', at most 63)", name)
	}
	return nil
}

// checkHost refuses a host name that is not a DNS name without wildcard.
func checkHost(field, host string) error {
	if len(host) > 253 || !hostRE.MatchString(host) {
		return errs.Invalid(field, "%q is not a DNS name (lower case labels separated by dots, at most 253)", host)
	}
	for _, l := range strings.Split(host, ".") {
		if len(l) > 63 {
			return errs.Invalid(field, "%q has a label longer than 63 characters", host)
		}
	}
	return nil
}

// isIP says whether an address is an IP address (no zone).
func isIP(addr string) bool {
	a, err := netip.ParseAddr(addr)
	return err == nil && a.Zone() == ""
}
