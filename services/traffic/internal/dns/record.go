package dns

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/netcheck"
	"github.com/dcm-project/dcm/platform/store"
	"sigs.k8s.io/external-dns/plan"
)

// Run states (DnsRunStatus.state).
const (
	stateActive    = "active"
	stateReleasing = "releasing"
)

// credentialsSecret names the sealed secret holding a run's credentials
// (a JSON object): one name, so a Set replaces them all at once.
const credentialsSecret = "credentials"

// Params and credentials a run may carry: external-dns's own flags for the
// rfc2136 provider, its TXT registry and its plan. Anything else is
// refused, so a typo does not silently fall back to a default.
var (
	knownParams = map[string]bool{
		"rfc2136-host": true, "rfc2136-port": true, "rfc2136-zone": true,
		"rfc2136-tsig-keyname": true, "rfc2136-tsig-secret-alg": true,
		"rfc2136-insecure": true, "rfc2136-min-ttl": true, "rfc2136-batch-change-size": true,
		"domain-filter": true, "txt-owner-id": true, "policy": true,
	}
	knownCredentials = map[string]bool{"rfc2136-tsig-secret": true, "rfc2136-tsig-keyname": true}
)

// Parameters are the external-dns parameters a run takes (the traffic
// service checks a DNS provider intent's against the same list).
func Parameters() []string { return slices.Sorted(maps.Keys(knownParams)) }

// pair is one map entry. Maps are stored as lists: label keys may hold
// '.', which the store refuses in field names.
type pair struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// stored is a run's record body (no credentials: those are sealed apart).
// It is kept as a google.protobuf.Struct, as there is no message of its own.
type stored struct {
	Group          string    `json:"group"`
	Intent         string    `json:"intent"`
	ID             string    `json:"id"`
	ExternalName   string    `json:"externalName"`
	Provider       string    `json:"provider"`
	Params         []pair    `json:"params,omitempty"`
	CredentialKeys []string  `json:"credentialKeys,omitempty"`
	Clusters       []Cluster `json:"clusters,omitempty"`
	Selector       []pair    `json:"selector,omitempty"`
	State          string    `json:"state"`
	LastSync       string    `json:"lastSync,omitempty"`
	LastError      string    `json:"lastError,omitempty"`
	Records        []string  `json:"records,omitempty"`
	// Failures counts the passes failed in a row; NextTry (RFC 3339) is
	// when the next may start (backoff). A Set clears both.
	Failures int    `json:"failures,omitempty"`
	NextTry  string `json:"nextTry,omitempty"`
}

func toPairs(m map[string]string) []pair {
	out := make([]pair, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, pair{k, m[k]})
	}
	return out
}

func fromPairs(ps []pair) map[string]string {
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.Key] = p.Value
	}
	return m
}

func (s *stored) toStruct() (*structpb.Struct, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, errs.Internal(err, "encode dns run")
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errs.Internal(err, "encode dns run")
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, errs.Internal(err, "encode dns run")
	}
	return st, nil
}

func fromStruct(st *structpb.Struct) (*stored, error) {
	b, err := json.Marshal(st.AsMap())
	if err != nil {
		return nil, errs.Internal(err, "decode dns run")
	}
	s := &stored{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, errs.Internal(err, "decode dns run")
	}
	return s, nil
}

func (s *stored) key() string { return store.Key(s.Group, s.Intent, s.ID) }

// OwnerID is the TXT registry's owner of a run's records: derived from
// the run's key (the traffic intent group's store key, which starts with
// its project, the intent and the entry id) and nothing a caller gives,
// so that no run claims another's records, least of all another
// project's. 128 bits of SHA-256: owner ids are public (in the zone's TXT
// records), and a shorter one could be matched by trying group names.
func OwnerID(group, intent, id string) string {
	h := sha256.Sum256([]byte(store.Key(group, intent, id)))
	return "dcm-" + hex.EncodeToString(h[:16])
}

func (s *stored) ownerID() string { return OwnerID(s.Group, s.Intent, s.ID) }

// project is the project of the run's group (its key's first name).
func (s *stored) project() string {
	p, _, _ := strings.Cut(s.Group, "/")
	return p
}

func (s *stored) status() *trafficv1.DnsRunStatus {
	out := &trafficv1.DnsRunStatus{Intent: s.Intent, Id: s.ID, ExternalName: s.ExternalName,
		Provider: s.Provider, State: s.State, LastError: s.LastError, Records: slices.Clone(s.Records)}
	for _, c := range s.Clusters {
		out.Clusters = append(out.Clusters, c.Provider+"/"+c.Cluster)
	}
	if t, err := time.Parse(time.RFC3339Nano, s.LastSync); err == nil {
		out.LastSync = timestamppb.New(t)
	}
	out.Failures = int32(min(s.Failures, 1<<30))
	if t, err := time.Parse(time.RFC3339Nano, s.NextTry); err == nil {
		out.NextTry = timestamppb.New(t)
	}
	return out
}

// validate checks a run as Set receives it; field paths are the DNS
// provider entry's (docs/traffic.md), prefixed with the run's place.
func validate(i int, group string, r Run) error {
	at := fmt.Sprintf("runs[%d].", i)
	if o, ok := r.Params["txt-owner-id"]; ok && o != OwnerID(group, r.Intent, r.ID) {
		return errs.Invalid(at+"externalDnsParameters.txt-owner-id", "is derived from the run's project, group, intent and id (%s): it cannot be set to another", OwnerID(group, r.Intent, r.ID))
	}
	switch {
	case r.Intent == "":
		return errs.Invalid(at+"intent", "is required")
	case r.ID == "":
		return errs.Invalid(at+"id", "is required")
	case r.ExternalName == "":
		return errs.Invalid(at+"externalName", "is required")
	case r.Provider != "rfc2136":
		return errs.Invalid(at+"provider", "%q is not supported (only rfc2136 is built and tested)", r.Provider)
	case len(r.Selector) == 0:
		// Without labels the run would publish every DNSEndpoint it can read.
		return errs.Invalid(at+"selector", "is required")
	}
	for k := range r.Params {
		if !knownParams[k] {
			return errs.Invalid(at+"externalDnsParameters."+k, "is not a supported external-dns parameter")
		}
	}
	for k := range r.Credentials {
		if !knownCredentials[k] {
			return errs.Invalid(at+"providerCredentials."+k, "is not a supported credential")
		}
	}
	for j, c := range r.Clusters {
		if c.Provider == "" || c.Cluster == "" || c.Namespace == "" || c.ServiceAccount == "" {
			return errs.Invalid(fmt.Sprintf("%sclusters[%d]", at, j), "needs a provider, a cluster, a namespace and a ServiceAccount")
		}
	}
	_, err := parseParams(at, r.Params, r.Credentials)
	return err
}

// providerParams are a run's rfc2136, registry and plan settings.
type providerParams struct {
	hosts, zones, domains []string
	port, batch           int
	keyName, alg          string
	secret                string
	insecure              bool
	minTTL                time.Duration
	policy                plan.Policy
}

func parseParams(at string, p, creds map[string]string) (*providerParams, error) {
	out := &providerParams{port: 53, batch: 50, alg: "hmac-sha256", policy: plan.Policies["sync"]}
	list := func(k string) []string {
		var l []string
		for v := range strings.SplitSeq(p[k], ",") {
			if v = strings.TrimSpace(v); v != "" {
				l = append(l, v)
			}
		}
		return l
	}
	field := func(k string) string { return at + "externalDnsParameters." + k }
	if out.hosts = list("rfc2136-host"); len(out.hosts) == 0 {
		return nil, errs.Invalid(field("rfc2136-host"), "is required")
	}
	for _, h := range out.hosts {
		if why := netcheck.ForbiddenHost(h); why != "" {
			return nil, errs.Invalid(field("rfc2136-host"), "%s %s: never a DNS provider", h, why)
		}
	}
	if out.zones = list("rfc2136-zone"); len(out.zones) == 0 {
		return nil, errs.Invalid(field("rfc2136-zone"), "is required")
	}
	out.domains = list("domain-filter")
	var err error
	if v := p["rfc2136-port"]; v != "" {
		if out.port, err = strconv.Atoi(v); err != nil || out.port < 1 || out.port > 65535 {
			return nil, errs.Invalid(field("rfc2136-port"), "must be a port number, not %q", v)
		}
	}
	if v := p["rfc2136-batch-change-size"]; v != "" {
		if out.batch, err = strconv.Atoi(v); err != nil || out.batch < 1 {
			return nil, errs.Invalid(field("rfc2136-batch-change-size"), "must be a positive number, not %q", v)
		}
	}
	if v := p["rfc2136-min-ttl"]; v != "" {
		if out.minTTL, err = time.ParseDuration(v); err != nil || out.minTTL < 0 {
			return nil, errs.Invalid(field("rfc2136-min-ttl"), "must be a duration such as 60s, not %q", v)
		}
	}
	if v := p["rfc2136-insecure"]; v != "" {
		if out.insecure, err = strconv.ParseBool(v); err != nil {
			return nil, errs.Invalid(field("rfc2136-insecure"), "must be true or false, not %q", v)
		}
	}
	if v := p["policy"]; v != "" {
		if out.policy = plan.Policies[v]; out.policy == nil {
			return nil, errs.Invalid(field("policy"), "must be sync, upsert-only or create-only, not %q", v)
		}
	}
	if v := p["rfc2136-tsig-secret-alg"]; v != "" {
		out.alg = v
	}
	switch out.alg {
	case "hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512":
	default:
		return nil, errs.Invalid(field("rfc2136-tsig-secret-alg"), "%q is not a TSIG algorithm external-dns supports", out.alg)
	}
	// The key name may be a credential or a parameter; the credential wins.
	out.keyName = cmp.Or(creds["rfc2136-tsig-keyname"], p["rfc2136-tsig-keyname"])
	out.secret = creds["rfc2136-tsig-secret"]
	if !out.insecure && (out.keyName == "" || out.secret == "") {
		return nil, errs.Invalid(at+"providerCredentials.rfc2136-tsig-secret",
			"a TSIG key name and secret are required unless rfc2136-insecure is true")
	}
	return out, nil
}
