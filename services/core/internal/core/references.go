package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
)

// References are a logical cloud's cluster references and key-value
// pairs, and the clusters it is on.
type References struct {
	*cloudReader
	refs  *store.Records[*corev1.ClusterReference]
	kvs   *store.Records[*corev1.StoredKvPair]
	rsync rsyncv1.RsyncInternalServiceClient
	facts *Facts
	// sets admits the clusters a project may use (clustergate.go).
	sets *ClusterSets
	log  *zap.Logger
}

// addReference stores a cluster reference, then checks that both the
// logical cloud and the cluster are still there (each is marked before it
// is deleted, so one of the two sides always sees the other). The cluster
// side is rsync's HoldCluster: it records that the logical cloud holds the
// cluster (rsync refuses to delete a held cluster, from its own records)
// and fails if the cluster is missing or being deleted.
func (s *References) addReference(ctx context.Context, project, lc string, ref *corev1.ClusterReference) error {
	parent := store.Key(project, lc)
	id := store.Key(parent, ref.GetClusterProvider(), ref.GetClusterName())
	owner := rolloutOwner(project, lc)
	return s.refs.CreateChecked(ctx, id, parent, ref, func(ctx context.Context) error {
		// The project's cluster sets, read after the record is written:
		// an unbinding marks its binding before it looks for references.
		if err := s.sets.check(ctx, project, "cluster-name", ref.GetClusterProvider(), ref.GetClusterName()); err != nil {
			return err
		}
		// Hold first, then check the logical cloud: if it is live here, its
		// deletion's mark comes later, so the cascade's release comes after
		// this hold and removes it.
		_, err := s.rsync.HoldCluster(ctx, &rsyncv1.HoldClusterRequest{
			Provider: ref.GetClusterProvider(), Cluster: ref.GetClusterName(), Owner: owner})
		if errs.Code(err) == codes.NotFound {
			return errs.Invalid("cluster-name", "cluster %q of provider %q is not registered", ref.GetClusterName(), ref.GetClusterProvider())
		}
		if err != nil {
			return err
		}
		if err := s.nameTaken(ctx, project, lc, ref); err != nil {
			// The hold is this reference's (the same cluster in this
			// logical cloud is one record, refused before this check).
			_, rerr := s.rsync.ReleaseClusters(context.WithoutCancel(ctx), &rsyncv1.ReleaseClustersRequest{
				Owner: owner, Provider: ref.GetClusterProvider(), Cluster: ref.GetClusterName()})
			if rerr != nil {
				return errors.Join(err, rerr)
			}
			return err
		}
		if _, err := s.cloud(ctx, project, lc); err != nil {
			_, rerr := s.rsync.ReleaseClusters(context.WithoutCancel(ctx), &rsyncv1.ReleaseClustersRequest{
				Owner: owner, Provider: ref.GetClusterProvider(), Cluster: ref.GetClusterName()})
			if rerr != nil {
				return errors.Join(err, rerr)
			}
			return err
		}
		return nil
	})
}

// refName is a cluster reference's own name: its metadata's, else (a
// reference stored before references had names) its cluster's.
func refName(r *corev1.ClusterReference) string {
	return cmp.Or(r.GetMetadata().GetName(), r.GetClusterName())
}

// named fills in the metadata name of a reference stored without one.
func named(r *corev1.ClusterReference) *corev1.ClusterReference {
	if r.GetMetadata().GetName() == "" {
		md, _ := proto.Clone(r.GetMetadata()).(*typesv1.Metadata)
		if md == nil {
			md = &typesv1.Metadata{}
		}
		md.Name = r.GetClusterName()
		r.Metadata = md
	}
	return r
}

// refByName finds the logical cloud's reference named name.
func (s *References) refByName(ctx context.Context, project, lc, name string) (*corev1.ClusterReference, error) {
	refs, err := s.refs.List(ctx, store.Key(project, lc))
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		if refName(r) == name {
			return named(r), nil
		}
	}
	return nil, errs.NotFound("logical cloud %q has no cluster reference named %q", lc, name)
}

// refKey resolves a request that names a reference either by its own name
// or by provider and cluster to the reference's provider and cluster. With
// both, they must agree (a body's spec sent back to .../{name}).
func (s *References) refKey(ctx context.Context, project, lc, name, provider, cluster string) (string, string, error) {
	if name == "" {
		if provider == "" {
			return "", "", errs.Invalid("cluster-provider", "is required (or name the reference)")
		}
		if cluster == "" {
			return "", "", errs.Invalid("cluster-name", "is required (or name the reference)")
		}
		return provider, cluster, nil
	}
	r, err := s.refByName(ctx, project, lc, name)
	if err != nil {
		return "", "", err
	}
	if provider != "" && provider != r.GetClusterProvider() {
		return "", "", errs.Invalid("cluster-provider", "reference %q is of provider %q: a reference's cluster cannot change (delete it and add another)", name, r.GetClusterProvider())
	}
	if cluster != "" && cluster != r.GetClusterName() {
		return "", "", errs.Invalid("cluster-name", "reference %q is of cluster %q: a reference's cluster cannot change (delete it and add another)", name, r.GetClusterName())
	}
	return r.GetClusterProvider(), r.GetClusterName(), nil
}

// CreateClusterReference implements corev1.LogicalCloudServiceServer. The
// reference is named by its metadata, else after its cluster; a name is
// unique in the logical cloud: checked after the record is written, so of
// two concurrent creates with one name neither can miss the other (both
// may be refused; neither is kept twice).
func (s *References) CreateClusterReference(ctx context.Context, req *corev1.CreateClusterReferenceRequest) (*corev1.CreateClusterReferenceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if err := checkLoadBalancerIP(req.GetLoadbalancerIp()); err != nil {
		return nil, err
	}
	if _, err := s.cloud(ctx, project, lc); err != nil {
		return nil, err
	}
	ref := named(&corev1.ClusterReference{
		ClusterProvider: req.GetClusterProvider(), ClusterName: req.GetClusterName(), LoadbalancerIp: req.GetLoadbalancerIp(),
		Metadata: req.GetMetadata(),
	})
	if err := s.addReference(ctx, project, lc, ref); err != nil {
		return nil, err
	}
	s.facts.retellOrLog(ctx, project, lc)
	return &corev1.CreateClusterReferenceResponse{ClusterReference: ref}, nil
}

// checkLoadBalancerIP refuses a loadbalancer-ip that is not a plain IP
// address: protovalidate's string.ip accepts an IPv6 zone, whose text is
// free (quotes and newlines included), and the address is written into the
// mesh's and the traffic controller's manifests. Empty is allowed (not
// known yet).
func checkLoadBalancerIP(ip string) error {
	if ip == "" {
		return nil
	}
	if _, err := kube.CheckIP(ip); err != nil {
		return errs.Invalid("loadbalancer-ip", "%v", err)
	}
	return nil
}

// nameTaken refuses ref when another reference of the logical cloud has its name.
func (s *References) nameTaken(ctx context.Context, project, lc string, ref *corev1.ClusterReference) error {
	refs, err := s.refs.List(ctx, store.Key(project, lc))
	if err != nil {
		return err
	}
	for _, r := range refs {
		if refName(r) == refName(ref) && (r.GetClusterProvider() != ref.GetClusterProvider() || r.GetClusterName() != ref.GetClusterName()) {
			return errs.AlreadyExists("logical cloud %q already has a cluster reference named %q (cluster %s/%s): give this one another metadata.name",
				lc, refName(ref), r.GetClusterProvider(), r.GetClusterName())
		}
	}
	return nil
}

// GetClusterReference implements corev1.LogicalCloudServiceServer.
func (s *References) GetClusterReference(ctx context.Context, req *corev1.GetClusterReferenceRequest) (*corev1.GetClusterReferenceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if _, err := s.cloud(ctx, project, lc); err != nil {
		return nil, err
	}
	if req.GetName() != "" {
		// Found by its name among the logical cloud's references: no second read.
		r, err := s.refByName(ctx, project, lc, req.GetName())
		if err != nil {
			return nil, err
		}
		return &corev1.GetClusterReferenceResponse{ClusterReference: r}, nil
	}
	provider, cluster, err := s.refKey(ctx, project, lc, "", req.GetClusterProvider(), req.GetClusterName())
	if err != nil {
		return nil, err
	}
	r, err := s.refs.Get(ctx, store.Key(project, lc, provider, cluster))
	if err != nil {
		return nil, err
	}
	return &corev1.GetClusterReferenceResponse{ClusterReference: named(r.Msg)}, nil
}

// ListClusterReferences implements corev1.LogicalCloudServiceServer.
func (s *References) ListClusterReferences(ctx context.Context, req *corev1.ListClusterReferencesRequest) (*corev1.ListClusterReferencesResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	page := store.PageOf(req)
	if p := req.GetClusterProvider(); p != "" {
		page.Match = map[string]string{"cluster_provider": p}
	}
	refs, next, err := s.refs.ListPage(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()), page)
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		named(r)
	}
	return &corev1.ListClusterReferencesResponse{ClusterReferences: refs, NextPageToken: next}, nil
}

// UpdateClusterReference implements corev1.LogicalCloudServiceServer: the
// load-balancer IP is replaced, and the description and user data when
// metadata is given.
func (s *References) UpdateClusterReference(ctx context.Context, req *corev1.UpdateClusterReferenceRequest) (*corev1.UpdateClusterReferenceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if err := checkLoadBalancerIP(req.GetLoadbalancerIp()); err != nil {
		return nil, err
	}
	if _, err := s.cloud(ctx, project, lc); err != nil {
		return nil, err
	}
	provider, cluster, err := s.refKey(ctx, project, lc, req.GetName(), req.GetClusterProvider(), req.GetClusterName())
	if err != nil {
		return nil, err
	}
	r, err := s.refs.Modify(ctx, store.Key(project, lc, provider, cluster),
		func(r *corev1.ClusterReference) error {
			if md := req.GetMetadata(); md != nil {
				if md.GetName() != refName(r) {
					return errs.Invalid("metadata.name", "must be the reference's name (%q), got %q: a reference cannot be renamed", refName(r), md.GetName())
				}
				r.Metadata = md
			}
			r.LoadbalancerIp = req.GetLoadbalancerIp()
			return nil
		})
	if err != nil {
		return nil, err
	}
	return &corev1.UpdateClusterReferenceResponse{ClusterReference: named(r)}, nil
}

// DeleteClusterReference implements corev1.LogicalCloudServiceServer.
func (s *References) DeleteClusterReference(ctx context.Context, req *corev1.DeleteClusterReferenceRequest) (*corev1.DeleteClusterReferenceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if _, err := s.cloud(ctx, project, lc); err != nil {
		return nil, err
	}
	provider, cluster, err := s.refKey(ctx, project, lc, req.GetName(), req.GetClusterProvider(), req.GetClusterName())
	if err != nil {
		return nil, err
	}
	if err := s.removeReference(ctx, project, lc, provider, cluster); err != nil {
		return nil, err
	}
	s.facts.retellOrLog(ctx, project, lc)
	return &corev1.DeleteClusterReferenceResponse{}, nil
}

// removeReference deletes the logical cloud's reference of a cluster and
// its hold. The hold is released first: a reference of the same cluster
// added once this one is gone holds it again after this release. Should
// rsync be down, nothing changes and the answer is its error (retry).
// Should the delete then fail, the cluster is held again.
func (s *References) removeReference(ctx context.Context, project, lc, provider, cluster string) error {
	owner := rolloutOwner(project, lc)
	if _, err := s.rsync.ReleaseClusters(ctx, &rsyncv1.ReleaseClustersRequest{
		Owner: owner, Provider: provider, Cluster: cluster}); err != nil {
		return err
	}
	if err := s.refs.Delete(ctx, store.Key(project, lc, provider, cluster)); err != nil {
		if errs.Code(err) != codes.NotFound {
			_, herr := s.rsync.HoldCluster(context.WithoutCancel(ctx), &rsyncv1.HoldClusterRequest{
				Owner: owner, Provider: provider, Cluster: cluster})
			if herr != nil {
				return errors.Join(err, herr)
			}
		}
		return err
	}
	return nil
}

// kvStored checks a KvPair's pairs (each one key with a string value) and
// returns its stored form.
func kvStored(field string, kv *corev1.KvPair) (*corev1.StoredKvPair, error) {
	out := &corev1.StoredKvPair{Metadata: kv.GetMetadata()}
	seen := map[string]bool{}
	for i, obj := range kv.GetSpec().GetKv() {
		f := fmt.Sprintf("%s.spec.kv[%d]", field, i)
		if len(obj.GetFields()) != 1 {
			return nil, errs.Invalid(f, "must be an object with exactly one key, got %d", len(obj.GetFields()))
		}
		for k, v := range obj.GetFields() {
			if k == "" || len(k) > 253 {
				return nil, errs.Invalid(f, "keys are 1 to 253 characters")
			}
			sv, ok := v.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, errs.Invalid(f+"."+k, "must be a string")
			}
			if seen[k] {
				return nil, errs.Invalid(f, "key %q is given twice", k)
			}
			seen[k] = true
			out.Pairs = append(out.Pairs, &corev1.KeyValue{Key: k, Value: sv.StringValue})
		}
	}
	return out, nil
}

// kvAPI is the API form of a stored KvPair.
func kvAPI(st *corev1.StoredKvPair) *corev1.KvPair {
	kv := &corev1.KvPair{Metadata: st.GetMetadata(), Spec: &corev1.KvPairSpec{}}
	for _, p := range st.GetPairs() {
		kv.Spec.Kv = append(kv.Spec.Kv, &structpb.Struct{Fields: map[string]*structpb.Value{p.GetKey(): structpb.NewStringValue(p.GetValue())}})
	}
	return kv
}

// CreateKvPair implements corev1.LogicalCloudServiceServer.
func (s *References) CreateKvPair(ctx context.Context, req *corev1.CreateKvPairRequest) (*corev1.CreateKvPairResponse, error) {
	st, err := kvStored("kv_pair", req.GetKvPair())
	if err != nil {
		return nil, err
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if _, err := s.cloud(ctx, project, lc); err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	err = s.kvs.CreateChecked(ctx, store.Key(parent, st.GetMetadata().GetName()), parent, st, func(ctx context.Context) error {
		_, err := s.cloud(ctx, project, lc)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &corev1.CreateKvPairResponse{KvPair: kvAPI(st)}, nil
}

// GetKvPair implements corev1.LogicalCloudServiceServer.
func (s *References) GetKvPair(ctx context.Context, req *corev1.GetKvPairRequest) (*corev1.GetKvPairResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	kv, err := s.kvs.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &corev1.GetKvPairResponse{KvPair: kvAPI(kv.Msg)}, nil
}

// ListKvPairs implements corev1.LogicalCloudServiceServer.
func (s *References) ListKvPairs(ctx context.Context, req *corev1.ListKvPairsRequest) (*corev1.ListKvPairsResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	kvs, next, err := s.kvs.ListPage(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	out := &corev1.ListKvPairsResponse{KvPairs: make([]*corev1.KvPair, 0, len(kvs)), NextPageToken: next}
	for _, kv := range kvs {
		out.KvPairs = append(out.KvPairs, kvAPI(kv))
	}
	return out, nil
}

// UpdateKvPair implements corev1.LogicalCloudServiceServer.
func (s *References) UpdateKvPair(ctx context.Context, req *corev1.UpdateKvPairRequest) (*corev1.UpdateKvPairResponse, error) {
	if n := req.GetKvPair().GetMetadata().GetName(); n != req.GetName() {
		return nil, errs.Invalid("kv_pair.metadata.name", "must equal the name in the path (%q), got %q", req.GetName(), n)
	}
	st, err := kvStored("kv_pair", req.GetKvPair())
	if err != nil {
		return nil, err
	}
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	_, err = s.kvs.Modify(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()), func(cur *corev1.StoredKvPair) error {
		cur.Metadata, cur.Pairs = st.GetMetadata(), st.GetPairs()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &corev1.UpdateKvPairResponse{KvPair: kvAPI(st)}, nil
}

// DeleteKvPair implements corev1.LogicalCloudServiceServer.
func (s *References) DeleteKvPair(ctx context.Context, req *corev1.DeleteKvPairRequest) (*corev1.DeleteKvPairResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	if err := s.kvs.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName())); err != nil {
		return nil, err
	}
	return &corev1.DeleteKvPairResponse{}, nil
}

// HoldReferences tells rsync, once at start, that every stored cluster
// reference holds its cluster, so that references stored before rsync kept
// holds (or whose hold a failed call left out) block the cluster's
// deletion as they should. Each hold is checked afterwards as addReference
// checks a new one: a reference or logical cloud that went meanwhile has
// its hold released again. A pass that fails is retried every interval.
func (s *References) HoldReferences(interval time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			n, err := s.holdAll(ctx)
			if err == nil {
				s.log.Info("referenced clusters held in rsync", zap.Int("references", n))
				return nil
			}
			s.log.Warn("hold the referenced clusters in rsync; retrying", zap.Error(err))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(interval):
			}
		}
	}
}

func (s *References) holdAll(ctx context.Context) (int, error) {
	refs, err := s.refs.Match(ctx, nil)
	if err != nil {
		return 0, err
	}
	held := 0
	for _, it := range refs {
		project, lc, ok := strings.Cut(it.Parent, "/")
		if it.Deleting || !ok {
			continue
		}
		hold := &rsyncv1.HoldClusterRequest{Provider: it.Msg.GetClusterProvider(), Cluster: it.Msg.GetClusterName(), Owner: rolloutOwner(project, lc)}
		_, err := s.rsync.HoldCluster(ctx, hold)
		if errs.Code(err) == codes.NotFound {
			s.log.Warn("a cluster reference names a cluster that is not registered", zap.String("reference", it.ID))
			continue
		}
		if err != nil {
			return held, err
		}
		_, rerr := s.refs.Get(ctx, it.ID)
		_, cerr := s.cloud(ctx, project, lc)
		if errs.Code(rerr) == codes.NotFound || errs.Code(cerr) == codes.NotFound {
			if _, err := s.rsync.ReleaseClusters(ctx, &rsyncv1.ReleaseClustersRequest{
				Owner: hold.GetOwner(), Provider: hold.GetProvider(), Cluster: hold.GetCluster()}); err != nil {
				return held, err
			}
			continue
		}
		held++
	}
	return held, nil
}

// targets are the logical cloud's clusters: its cluster references, and
// the registered clusters that carry all of its cluster labels (seed 002)
// and that the project's cluster sets admit, ordered by provider and name.
func (s *References) targets(ctx context.Context, project, lc string, c *corev1.LogicalCloud) ([]target, error) {
	refs, err := s.refs.List(ctx, store.Key(project, lc))
	if err != nil {
		return nil, err
	}
	var out []target
	for _, r := range refs {
		out = append(out, target{r.GetClusterProvider(), r.GetClusterName(), r.GetLoadbalancerIp()})
	}
	if labels := c.GetSpec().GetClusterLabels(); len(labels) > 0 {
		resp, err := s.rsync.SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: labels})
		if err != nil {
			return nil, err
		}
		g, err := s.sets.gate(ctx, project)
		if err != nil {
			return nil, err
		}
		for _, sc := range resp.GetClusters() {
			ok, err := g.admits(ctx, sc.GetProvider(), sc.GetName())
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, target{sc.GetProvider(), sc.GetName(), ""})
			}
		}
	}
	// Stable: a cluster both referenced and selected keeps its reference.
	slices.SortStableFunc(out, func(a, b target) int {
		return strings.Compare(a.provider+"/"+a.cluster, b.provider+"/"+b.cluster)
	})
	return slices.CompactFunc(out, func(a, b target) bool { return a.provider == b.provider && a.cluster == b.cluster }), nil
}

// purge removes the cluster references and kv pairs under logical cloud
// parent (the delete cascade; the clusters' holds are released apart).
func (s *References) purge(ctx context.Context, parent string) error {
	_, rerr := s.refs.DeleteUnder(ctx, parent)
	if rerr != nil {
		rerr = fmt.Errorf("cluster references: %w", rerr)
	}
	_, kerr := s.kvs.DeleteUnder(ctx, parent)
	if kerr != nil {
		kerr = fmt.Errorf("kv pairs: %w", kerr)
	}
	return firstOf([]error{rerr, kerr})
}
