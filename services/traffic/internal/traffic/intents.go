package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// named is an intent message: every kind has a name.
type named interface {
	proto.Message
	GetName() string
}

// groupReq names a group (create and list of intents).
type groupReq interface {
	appVersion
	GetGroup() string
}

// intentReq names an intent in a group.
type intentReq interface {
	groupReq
	GetName() string
}

// intents is one kind of intent: its collection under the group's key and
// its checks. Every kind behaves the same; DNS provider intents also seal
// their credentials (seal).
type intents[M named] struct {
	recs *store.Records[M]
	// field is the request field carrying the body (errors name paths under it).
	field string
	// check validates (and normalizes) a body; field is the path prefix.
	check func(field string, m M) error
	// defalt names an intent given no name.
	defalt func(M) string
	// bind, if set, checks (and completes) a named body against what it
	// depends on beyond itself: its place (id, its store key), the
	// caller, other records. field is the path prefix.
	bind func(ctx context.Context, field, id string, m M) error
	// seal, if set, takes the secrets out of a body about to be stored
	// under id (update: the record exists and keeps what is not replaced).
	seal func(ctx context.Context, field string, recs *store.Records[M], id string, m M, update bool) ([]store.Secret, error)
	// groups are the traffic intent groups, read for the parent check.
	groups *store.Records[*trafficv1.TrafficIntentGroup]
}

func setName(m proto.Message, name string) {
	r := m.ProtoReflect()
	r.Set(r.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString(name))
}

func groupKey(r groupReq) string { return store.Key(parentOf(r), r.GetGroup()) }

// groupExists is an intent create's parent check (after the insert, so an
// intent never outlives its group: the group's deletion marks it first).
func (k *intents[M]) groupExists(gk string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := k.groups.Get(ctx, gk)
		return err
	}
}

func (k *intents[M]) create(ctx context.Context, r groupReq, m M) (M, error) {
	var zero M
	f := k.field + "."
	if err := k.check(f, m); err != nil {
		return zero, err
	}
	if m.GetName() == "" {
		setName(m, k.defalt(m))
	}
	if m.GetName() == "" {
		return zero, errs.Invalid(f+"name", "is required")
	}
	gk := groupKey(r)
	id := store.Key(gk, m.GetName())
	if k.bind != nil {
		if err := k.bind(ctx, f, id, m); err != nil {
			return zero, err
		}
	}
	var secrets []store.Secret
	if k.seal != nil {
		var err error
		if secrets, err = k.seal(ctx, f, k.recs, id, m, false); err != nil {
			return zero, err
		}
	}
	if err := k.recs.CreateChecked(ctx, id, gk, m, k.groupExists(gk), secrets...); err != nil {
		return zero, err
	}
	return m, nil
}

func (k *intents[M]) get(ctx context.Context, r intentReq) (M, error) {
	v, err := k.recs.Get(ctx, store.Key(groupKey(r), r.GetName()))
	return v.Msg, err
}

func (k *intents[M]) list(ctx context.Context, r interface {
	groupReq
	store.Paged
}) ([]M, string, error) {
	gk := groupKey(r)
	// A missing group is 404, not an empty list.
	if _, err := k.groups.Get(ctx, gk); err != nil {
		return nil, "", err
	}
	return k.recs.ListPage(ctx, gk, store.PageOf(r))
}

func (k *intents[M]) update(ctx context.Context, r intentReq, m M) (M, error) {
	var zero M
	f := k.field + "."
	if n := m.GetName(); n != "" && n != r.GetName() {
		return zero, errs.Invalid(f+"name", "%q is not the URL's name %q: an intent cannot be renamed", n, r.GetName())
	}
	if err := k.check(f, m); err != nil {
		return zero, err
	}
	setName(m, r.GetName())
	id := store.Key(groupKey(r), r.GetName())
	cur, err := k.recs.Get(ctx, id)
	if err != nil {
		return zero, err
	}
	if k.bind != nil {
		if err := k.bind(ctx, f, id, m); err != nil {
			return zero, err
		}
	}
	var secrets []store.Secret
	if k.seal != nil {
		if secrets, err = k.seal(ctx, f, k.recs, id, m, true); err != nil {
			return zero, err
		}
	}
	if err := k.recs.Update(ctx, id, cur.Version, m, secrets...); err != nil {
		return zero, err
	}
	return m, nil
}

func (k *intents[M]) delete(ctx context.Context, r intentReq) error {
	return k.recs.Delete(ctx, store.Key(groupKey(r), r.GetName()))
}

// credentialsSecret is the one sealed secret of a DNS provider intent: a
// JSON object of entry id to that entry's credentials.
const credentialsSecret = "provider-credentials"

// sealCredentials takes every entry's providerCredentials out of m into one
// sealed secret and lists their names in credential-keys. On update an
// entry without credentials keeps those stored for its id, unless its
// server (rfc2136-host, rfc2136-port) or TSIG algorithm changed: stored
// credentials are never sent to another server than the one they were
// given for, so such an update must give them again (400 naming
// providerCredentials.rfc2136-tsig-secret) or turn TSIG off.
func sealCredentials(ctx context.Context, field string, recs *store.Records[*trafficv1.DnsProviderIntent], id string, m *trafficv1.DnsProviderIntent, update bool) ([]store.Secret, error) {
	old := map[string]map[string]string{}
	before := map[string]*trafficv1.DnsProvider{}
	if update {
		var err error
		if old, err = openCredentials(ctx, recs, id); err != nil {
			return nil, err
		}
		cur, err := recs.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, d := range cur.Msg.GetDnsProvider() {
			before[d.GetId()] = d
		}
	}
	all := map[string]map[string]string{}
	for i, d := range m.GetDnsProvider() {
		c := d.GetProviderCredentials()
		if len(c) == 0 && len(old[d.GetId()]) > 0 {
			if sameServer(before[d.GetId()], d) {
				c = old[d.GetId()]
			} else if b, _ := strconv.ParseBool(d.GetExternalDnsParameters()["rfc2136-insecure"]); !b {
				return nil, errs.Invalid(fmt.Sprintf("%sdnsProvider[%d].providerCredentials.rfc2136-tsig-secret", field, i),
					"rfc2136-host, rfc2136-port or rfc2136-tsig-secret-alg changed: give the TSIG credentials for the new server (the stored ones are dropped, never sent to another server)")
			}
		}
		d.ProviderCredentials = nil
		d.CredentialKeys = slices.Sorted(maps.Keys(c))
		if len(c) > 0 {
			all[d.GetId()] = c
		}
	}
	v, err := json.Marshal(all)
	if err != nil {
		return nil, errs.Internal(err, "encode credentials")
	}
	return []store.Secret{{Name: credentialsSecret, Value: v}}, nil
}

// sameServer tells whether an entry's stored credentials may go on with
// its new parameters: the same hosts, port and TSIG algorithm (defaults
// filled in).
func sameServer(was, now *trafficv1.DnsProvider) bool {
	if was == nil {
		return false
	}
	for _, k := range []struct{ name, dflt string }{{"rfc2136-host", ""}, {"rfc2136-port", "53"}, {"rfc2136-tsig-secret-alg", "hmac-sha256"}} {
		norm := func(p map[string]string) string {
			v := strings.ToLower(strings.TrimSpace(p[k.name]))
			if v == "" {
				v = k.dflt
			}
			return strings.TrimSuffix(v, ".")
		}
		if norm(was.GetExternalDnsParameters()) != norm(now.GetExternalDnsParameters()) {
			return false
		}
	}
	return true
}

// openCredentials reads a DNS provider intent's credentials by entry id.
func openCredentials(ctx context.Context, recs *store.Records[*trafficv1.DnsProviderIntent], id string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	v, err := recs.Secret(ctx, id, credentialsSecret)
	if errs.Code(err) == codes.NotFound {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(v, &out); err != nil {
		// Never the value: only that it did not decode.
		return nil, errs.Internal(errs.FailedPrecondition("stored credentials of %q do not decode", id), "stored credentials do not decode")
	}
	return out, nil
}

func (s *Groups) credentials(ctx context.Context, id string) (map[string]map[string]string, error) {
	return openCredentials(ctx, s.dnsIntents.dns.recs, id)
}
