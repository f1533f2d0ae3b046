package traffic

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/netcheck"
)

// DNSIntents is the part that serves the DNS provider intents: their
// collection, whose records keep the providers' credentials sealed
// (intents.go, sealCredentials), and their checks, the project's DNS
// allow-list among them (AllowLists.bindDNS).
type DNSIntents struct {
	dns *intents[*trafficv1.DnsProviderIntent]
}

// providerRFC2136 is the one external-dns provider this build runs.
const providerRFC2136 = "rfc2136"

// rfc2136Params are the external-dns flags (without "--") a DNS provider
// entry may set, each with its check. None contains a '.', so the
// parameters can stay a map in the stored record: the store refuses field
// names with dots (FerretDB).
var rfc2136Params = map[string]func(string) string{
	"rfc2136-host": func(v string) string {
		if _, err := netip.ParseAddr(v); err != nil && !isHostname(strings.TrimSuffix(v, ".")) {
			return "is not an IP address or host name"
		}
		// Checked before anything is stored, so no run ever dials it.
		if why := netcheck.ForbiddenHost(v); why != "" {
			return why + ": never a DNS provider"
		}
		return ""
	},
	"rfc2136-port": func(v string) string {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
			return "is not a port (1 to 65535)"
		}
		return ""
	},
	"rfc2136-zone": func(v string) string {
		if !isHostname(strings.TrimSuffix(v, ".")) {
			return "is not a DNS zone name"
		}
		return ""
	},
	"rfc2136-insecure":     isBool,
	"rfc2136-tsig-keyname": anyText,
	"rfc2136-tsig-secret-alg": func(v string) string {
		if slices.Contains([]string{"hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"}, strings.TrimSuffix(v, ".")) {
			return ""
		}
		return "is not one of hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512"
	},
	"rfc2136-min-ttl": func(v string) string {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return "is not a duration (such as 30s)"
		}
		return ""
	},
	"rfc2136-batch-change-size": func(v string) string {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return "is not a positive number"
		}
		return ""
	},
	"domain-filter": anyText,
	"txt-owner-id":  anyText,
	"policy": func(v string) string {
		if slices.Contains([]string{"sync", "upsert-only", "create-only"}, v) {
			return ""
		}
		return "is not one of sync, upsert-only, create-only"
	},
}

// requiredParams must be set for an rfc2136 entry.
var requiredParams = []string{"rfc2136-host", "rfc2136-zone"}

// credentialKeys are the names providerCredentials may hold.
var credentialKeys = []string{"rfc2136-tsig-keyname", "rfc2136-tsig-secret"}

func isBool(v string) string {
	if _, err := strconv.ParseBool(v); err != nil {
		return "is not true or false"
	}
	return ""
}

func anyText(v string) string {
	if len(v) > 1024 {
		return "is longer than 1024 characters"
	}
	return ""
}

// checkDNS checks a DNS provider intent and fills in what the stored form
// holds: the provider (inferred when empty) and credential-keys. It never
// quotes a parameter's or credential's value.
func checkDNS(field string, m *trafficv1.DnsProviderIntent) error {
	ids := map[string]bool{}
	for i, d := range m.GetDnsProvider() {
		f := fmt.Sprintf("%sdnsProvider[%d].", field, i)
		if ids[d.GetId()] {
			return errs.Invalid(f+"id", "id %q is used twice in this intent", d.GetId())
		}
		ids[d.GetId()] = true
		if p := d.GetProvider(); p != "" && p != providerRFC2136 {
			return errs.Invalid(f+"provider", "provider %q is not supported: only rfc2136 is supported by this build", p)
		}
		if err := checkSelector(f+"cluster-selector", d.GetClusterSelector()); err != nil {
			return err
		}
		keys := slices.Sorted(maps.Keys(d.GetExternalDnsParameters()))
		for _, k := range keys {
			check, ok := rfc2136Params[k]
			pf := f + "externalDnsParameters." + k
			switch {
			case slices.Contains(credentialKeys, k) && k != "rfc2136-tsig-keyname":
				return errs.Invalid(pf, "is a credential: give it in providerCredentials, which are sealed and never answered")
			case !ok && strings.Contains(k, "-") && !strings.HasPrefix(k, providerRFC2136+"-"):
				return errs.Invalid(pf, "is a parameter of another provider: only rfc2136 is supported by this build")
			case !ok:
				return errs.Invalid(pf, "is not an external-dns rfc2136 parameter (allowed: %s)", strings.Join(slices.Sorted(maps.Keys(rfc2136Params)), ", "))
			}
			if msg := check(d.GetExternalDnsParameters()[k]); msg != "" {
				return errs.Invalid(pf, "%s", msg)
			}
		}
		for _, k := range requiredParams {
			if _, ok := d.GetExternalDnsParameters()[k]; !ok {
				return errs.Invalid(f+"externalDnsParameters."+k, "is required for the rfc2136 provider")
			}
		}
		d.Provider = providerRFC2136
		for _, k := range slices.Sorted(maps.Keys(d.GetProviderCredentials())) {
			if !slices.Contains(credentialKeys, k) {
				return errs.Invalid(f+"providerCredentials."+k, "is not a credential of the rfc2136 provider (allowed: %s)", strings.Join(credentialKeys, ", "))
			}
			if d.GetProviderCredentials()[k] == "" {
				return errs.Invalid(f+"providerCredentials."+k, "is empty")
			}
		}
	}
	return nil
}

// checkSelector checks a comma-separated list of cluster labels.
func checkSelector(field, s string) error {
	if s == "" {
		return nil
	}
	for i, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l == "" || len(l) > 63 {
			return errs.Invalid(field, "label %d is empty or longer than 63 characters: give labels separated by commas", i+1)
		}
	}
	return nil
}

// CreateDnsProviderIntent implements trafficv1.TrafficServiceServer.
func (s *DNSIntents) CreateDnsProviderIntent(ctx context.Context, req *trafficv1.CreateDnsProviderIntentRequest) (*trafficv1.CreateDnsProviderIntentResponse, error) {
	m, err := s.dns.create(ctx, req, req.GetDnsProviderIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.CreateDnsProviderIntentResponse{DnsProviderIntent: m}, nil
}

// GetDnsProviderIntent implements trafficv1.TrafficServiceServer.
func (s *DNSIntents) GetDnsProviderIntent(ctx context.Context, req *trafficv1.GetDnsProviderIntentRequest) (*trafficv1.GetDnsProviderIntentResponse, error) {
	m, err := s.dns.get(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetDnsProviderIntentResponse{DnsProviderIntent: m}, nil
}

// ListDnsProviderIntents implements trafficv1.TrafficServiceServer.
func (s *DNSIntents) ListDnsProviderIntents(ctx context.Context, req *trafficv1.ListDnsProviderIntentsRequest) (*trafficv1.ListDnsProviderIntentsResponse, error) {
	ms, next, err := s.dns.list(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.ListDnsProviderIntentsResponse{DnsProviderIntents: ms, NextPageToken: next}, nil
}

// UpdateDnsProviderIntent implements trafficv1.TrafficServiceServer.
func (s *DNSIntents) UpdateDnsProviderIntent(ctx context.Context, req *trafficv1.UpdateDnsProviderIntentRequest) (*trafficv1.UpdateDnsProviderIntentResponse, error) {
	m, err := s.dns.update(ctx, req, req.GetDnsProviderIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.UpdateDnsProviderIntentResponse{DnsProviderIntent: m}, nil
}

// DeleteDnsProviderIntent implements trafficv1.TrafficServiceServer.
func (s *DNSIntents) DeleteDnsProviderIntent(ctx context.Context, req *trafficv1.DeleteDnsProviderIntentRequest) (*trafficv1.DeleteDnsProviderIntentResponse, error) {
	if err := s.dns.delete(ctx, req); err != nil {
		return nil, err
	}
	return &trafficv1.DeleteDnsProviderIntentResponse{}, nil
}
