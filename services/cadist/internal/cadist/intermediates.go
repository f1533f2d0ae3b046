package cadist

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// An intermediate's record is its public bundle (root_cert and
// trusted_roots are filled in on each read, from the logical cloud's CA
// state), under the logical cloud (parent project/lc), with the key sealed
// as ca_key. Its id is project/lc/provider/cluster/<generation>: a new
// intermediate of a cluster takes the next generation, so two requests
// racing to replace one make one record, and a revoked one is never
// reused.

// maxAttempts bounds the retries of a request that lost an optimistic
// concurrency race to another one on the same logical cloud.
const maxAttempts = 5

// retry runs f again while it loses a race (Aborted, or AlreadyExists on
// a generation another request took).
func retry(f func() error) error {
	var err error
	for range maxAttempts {
		err = f()
		if c := errs.Code(err); c != codes.Aborted && c != codes.AlreadyExists {
			return err
		}
	}
	return err
}

func cloudKey(project, lc string) string { return store.Key(project, lc) }

type intermediate = store.Item[*cadistv1.Bundle]

// generation is the last part of an intermediate's id.
func generation(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '/')+1:])
	return n
}

// findLive picks the live intermediate of a cluster among a logical
// cloud's, and the highest generation that cluster has used.
func findLive(items []intermediate, provider, cluster string) (live *intermediate, lastGen int) {
	for i := range items {
		b := items[i].Msg
		if b.GetClusterProvider() != provider || b.GetCluster() != cluster {
			continue
		}
		lastGen = max(lastGen, generation(items[i].ID))
		if !b.GetRevoked() && !items[i].Deleting {
			live = &items[i]
		}
	}
	return live, lastGen
}

// Intermediates is the intermediates' API for the service mesh service and
// core: issue, read with the key, revoke and purge; and the pruning of
// revoked records.
type Intermediates struct {
	*issuer
	// retention is how long a revoked intermediate's record is kept.
	retention time.Duration
}

// issuer issues and revokes a cluster's intermediate, for Intermediates
// and Rotation.
type issuer struct {
	*cloudCAs
	intermediates *store.Records[*cadistv1.Bundle]
	now           func() time.Time
	// lifetime is how long an intermediate is valid (capped by its
	// root's expiry).
	lifetime time.Duration
}

// IssueIntermediates implements cadistv1.CaDistInternalServiceServer.
func (s *Intermediates) IssueIntermediates(ctx context.Context, req *cadistv1.IssueIntermediatesRequest) (*cadistv1.IssueIntermediatesResponse, error) {
	if err := checkTrustDomain(req.GetTrustDomain()); err != nil {
		return nil, errs.Invalid("trust-domain", "%v", err)
	}
	var out []*cadistv1.Bundle
	err := retry(func() error {
		out = out[:0]
		ca, root, err := s.settleRoot(ctx, req.GetProject(), req.GetLogicalCloud(), req.GetRoot())
		if err != nil {
			return err
		}
		items, err := s.intermediates.Children(ctx, cloudKey(req.GetProject(), req.GetLogicalCloud()))
		if err != nil {
			return err
		}
		dns := dnsDomains(req.GetNamespaces())
		for _, c := range req.GetClusters() {
			b, err := s.ensure(ctx, ca, root, items, c, req.GetTrustDomain(), dns)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &cadistv1.IssueIntermediatesResponse{Bundles: out}, nil
}

// ensure keeps a cluster's live intermediate if the logical cloud's root
// signed it for this trust domain and these DNS names and less than
// renewAfter of its life has passed, and otherwise revokes it and issues
// the next one.
func (s *issuer) ensure(ctx context.Context, ca *cadistv1.LogicalCloudCa, root *signingRoot, items []intermediate, c *cadistv1.MeshCluster, trustDomain string, dns []string) (*cadistv1.Bundle, error) {
	live, lastGen := findLive(items, c.GetProvider(), c.GetCluster())
	if live != nil {
		b := live.Msg
		if b.GetRoot() == root.msg.GetMetadata().GetName() && b.GetTrustDomain() == trustDomain && slices.Equal(permittedDNS(b), dns) && !s.dueForRenewal(b) {
			return s.public(ctx, ca, b), nil
		}
		if err := s.revoke(ctx, *live); err != nil {
			return nil, err
		}
	}
	return s.issue(ctx, ca, root, ca.GetProject(), ca.GetLogicalCloud(), c.GetProvider(), c.GetCluster(), trustDomain, dns, lastGen+1)
}

// permittedDNS is the sorted DNS name constraint of an intermediate (nil
// if it has none, or is unreadable).
func permittedDNS(b *cadistv1.Bundle) []string {
	certs, err := parseCerts(b.GetCaCert())
	if err != nil || len(certs) == 0 || len(certs[0].PermittedDNSDomains) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(certs[0].PermittedDNSDomains))
}

// renewAfter is the share of an intermediate's life after which the next
// IssueIntermediates replaces it, so a cluster never runs on an expired
// one as long as its logical cloud is updated now and then.
const renewAfter = 2.0 / 3

// dueForRenewal tells whether an intermediate is past renewAfter of its
// life (or unreadable).
func (s *issuer) dueForRenewal(b *cadistv1.Bundle) bool {
	certs, err := parseCerts(b.GetCaCert())
	if err != nil || len(certs) == 0 {
		return true
	}
	c := certs[0]
	life := c.NotAfter.Sub(c.NotBefore)
	return !s.now().Before(c.NotBefore.Add(time.Duration(float64(life) * renewAfter)))
}

// revoke marks an intermediate revoked, and when, conditionally on the
// version read.
func (s *issuer) revoke(ctx context.Context, it intermediate) error {
	it.Msg.Revoked = true
	it.Msg.RevokedAt = s.now().UTC().Format(time.RFC3339Nano)
	return s.intermediates.Update(ctx, it.ID, it.Version, it.Msg)
}

// PruneRevoked deletes the records of intermediates revoked more than
// RevokedRetention ago, but for the newest record of each cluster (so a
// generation number is never taken again), and answers how many went. A
// revoked record from before revocations were dated is dated now. The
// root generator's loop runs it.
func (s *Intermediates) PruneRevoked(ctx context.Context) (int, error) {
	all, err := s.intermediates.All(ctx)
	if err != nil {
		return 0, err
	}
	// The newest generation of each cluster, revoked or not.
	last := map[string]int{}
	clusterOf := func(b *cadistv1.Bundle) string {
		return store.Key(b.GetProject(), b.GetLogicalCloud(), b.GetClusterProvider(), b.GetCluster())
	}
	for _, it := range all {
		last[clusterOf(it.Msg)] = max(last[clusterOf(it.Msg)], generation(it.ID))
	}
	now, n := s.now(), 0
	for _, it := range all {
		b := it.Msg
		if it.Deleting || !b.GetRevoked() {
			continue
		}
		at, perr := time.Parse(time.RFC3339Nano, b.GetRevokedAt())
		var err error
		switch {
		case perr != nil:
			b.RevokedAt = now.UTC().Format(time.RFC3339Nano)
			err = s.intermediates.Update(ctx, it.ID, it.Version, b)
		case now.Sub(at) < s.retention || generation(it.ID) >= last[clusterOf(b)]:
			continue
		default:
			if err = s.intermediates.DeleteVersion(ctx, it.ID, it.Version); err == nil {
				n++
			}
		}
		// A record another request changed or removed meanwhile is left
		// for the next pass.
		if err != nil && errs.Code(err) != codes.Aborted && errs.Code(err) != codes.NotFound {
			return n, err
		}
	}
	return n, nil
}

// issue makes and stores generation gen of a cluster's intermediate.
func (s *issuer) issue(ctx context.Context, ca *cadistv1.LogicalCloudCa, root *signingRoot, project, lc, provider, cluster, trustDomain string, dns []string, gen int) (*cadistv1.Bundle, error) {
	now := s.now()
	path, err := parseCerts(root.chain) // the root's certificate, then its issuers
	if err != nil {
		return nil, errs.Internal(err, "stored root is unreadable")
	}
	notAfter := now.Add(s.lifetime)
	for _, c := range path {
		if c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	cert, key, err := signIntermediate(intermediateSpec{
		project: project, logicalCloud: lc, provider: provider, cluster: cluster,
		trustDomain: trustDomain, dnsDomains: dns, notBefore: now.Add(-time.Minute), notAfter: notAfter,
	}, root.cert, root.key)
	if err != nil {
		return nil, errs.Internal(fmt.Errorf("sign intermediate of %s/%s/%s/%s: %w", project, lc, provider, cluster, err), "cannot sign the intermediate")
	}
	// What istiod and workloads will check: the new intermediate verifies
	// up to the trust anchor (a root's own name constraints, say, might
	// leave the intermediate out).
	if err := verifyPath(cert, path, now); err != nil {
		return nil, &errs.Error{Code: codes.FailedPrecondition, Field: "root", Msg: fmt.Sprintf(
			"root: an intermediate root %q signs for %s/%s/%s/%s does not verify up to its trust anchor: %v", root.msg.GetMetadata().GetName(), project, lc, provider, cluster, err)}
	}
	k, err := keyPEM(key)
	if err != nil {
		return nil, errs.Internal(err, "cannot encode the intermediate's key")
	}
	rootName := root.msg.GetMetadata().GetName()
	b := &cadistv1.Bundle{
		Project: project, LogicalCloud: lc, ClusterProvider: provider, Cluster: cluster,
		CaCert:      certPEM(cert),
		CertChain:   certPEM(cert) + root.chain,
		RootCertUrl: rootCertURL(rootName),
		NotAfter:    cert.NotAfter.UTC().Format(time.RFC3339),
		Serial:      cert.SerialNumber.Text(16),
		Root:        rootName,
		TrustDomain: trustDomain,
	}
	id := store.Key(project, lc, provider, cluster, fmt.Sprintf("%06d", gen))
	if err := s.intermediates.Create(ctx, id, cloudKey(project, lc), b, store.Secret{Name: caKeySecret, Value: k}); err != nil {
		return nil, err
	}
	return s.public(ctx, ca, b), nil
}

func rootCertURL(root string) string { return "/v2/cadist/roots/" + root + "/certificate" }

// GetIntermediate implements cadistv1.CaDistInternalServiceServer.
func (s *Intermediates) GetIntermediate(ctx context.Context, req *cadistv1.GetIntermediateRequest) (*cadistv1.GetIntermediateResponse, error) {
	items, err := s.intermediates.Children(ctx, cloudKey(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	c := req.GetCluster()
	live, _ := findLive(items, c.GetProvider(), c.GetCluster())
	if live == nil {
		return nil, errs.NotFound("logical cloud %q of project %q has no live intermediate on cluster %s/%s (IssueIntermediates makes it)",
			req.GetLogicalCloud(), req.GetProject(), c.GetProvider(), c.GetCluster())
	}
	key, err := s.intermediates.Secret(ctx, live.ID, caKeySecret)
	if err != nil {
		return nil, err
	}
	ca, err := s.cloudCA(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	return &cadistv1.GetIntermediateResponse{Bundle: s.public(ctx, ca, live.Msg), CaKey: string(key)}, nil
}

// RevokeIntermediates implements cadistv1.CaDistInternalServiceServer.
func (s *Intermediates) RevokeIntermediates(ctx context.Context, req *cadistv1.RevokeIntermediatesRequest) (*cadistv1.RevokeIntermediatesResponse, error) {
	var n int32
	err := retry(func() error {
		items, err := s.intermediates.Children(ctx, cloudKey(req.GetProject(), req.GetLogicalCloud()))
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.Msg.GetRevoked() || it.Deleting || !listed(req.GetClusters(), it.Msg) {
				continue
			}
			if err := s.revoke(ctx, it); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &cadistv1.RevokeIntermediatesResponse{Revoked: n}, nil
}

// listed tells whether b's cluster is among clusters (none listed: all are).
func listed(clusters []*cadistv1.MeshCluster, b *cadistv1.Bundle) bool {
	if len(clusters) == 0 {
		return true
	}
	for _, c := range clusters {
		if c.GetProvider() == b.GetClusterProvider() && c.GetCluster() == b.GetCluster() {
			return true
		}
	}
	return false
}

// PurgeLogicalCloud implements cadistv1.CaDistInternalServiceServer.
func (s *Intermediates) PurgeLogicalCloud(ctx context.Context, req *cadistv1.PurgeLogicalCloudRequest) (*cadistv1.PurgeLogicalCloudResponse, error) {
	key := cloudKey(req.GetProject(), req.GetLogicalCloud())
	if _, err := s.intermediates.DeleteUnder(ctx, key); err != nil {
		return nil, err
	}
	if err := s.clouds.Delete(ctx, key); err != nil && errs.Code(err) != codes.NotFound {
		return nil, err
	}
	return &cadistv1.PurgeLogicalCloudResponse{}, nil
}
