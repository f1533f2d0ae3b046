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
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// Peers are the services a logical cloud spans: their public APIs (what
// core does as a REST caller would) and their internal ones (what core
// tells them: create, render, purge, rollouts, holds), which they serve to
// DCM services only. None of them calls core back on an internal RPC.
type Peers struct {
	Namespaces     namespacev1.NamespaceInternalServiceClient
	Users          userv1.UserServiceClient
	UsersInternal  userv1.UserInternalServiceClient
	Quotas         quotav1.QuotaServiceClient
	QuotasInternal quotav1.QuotaInternalServiceClient
	Rsync          rsyncv1.RsyncServiceClient
	RsyncInternal  rsyncv1.RsyncInternalServiceClient
	MeshInternal   servicemeshv1.ServiceMeshInternalServiceClient
	CaDistInternal cadistv1.CaDistInternalServiceClient
	// Mesh reads a logical cloud's service mesh document (revision, Istio
	// namespace) for the traffic controller.
	Mesh            servicemeshv1.ServiceMeshServiceClient
	Traffic         trafficv1.TrafficServiceClient
	TrafficInternal trafficv1.TrafficInternalServiceClient
	// Facts are the programs serving the facts contract for the namespace,
	// user, quota and traffic services (facts.go): one per address.
	Facts []FactsPeer
}

// LogicalClouds is the LogicalCloudService: a thin type composed of the
// parts that each do one job, with only the collections, peers and
// settings that job uses (as OCM and Karmada give each controller its own
// type). The gRPC methods are the parts' own, promoted:
//
//   - Clouds: create, read, update and delete of logical clouds, and the
//     cascade that removes one from every service (logicalclouds.go);
//   - ControlPlanes: seed 002's POST .../control-plane (controlplane.go);
//   - Lifecycle: apply, update, stop, terminate and status (lifecycle.go);
//   - References: cluster references and kv pairs (references.go);
//   - Kubeconfigs: the users' kubeconfigs (kubeconfig.go);
//   - QuotaUsage: the quotas' usage on the clusters (quotausage.go);
//   - Facts: what core tells the child services (facts.go);
//   - Labels: label-selected logical clouds following the cluster
//     registry (labels.go).
//
// Meshes (mesh records, CRD rollouts, mesh limit, claims: mesh.go) and
// TrafficRollouts (traffic.go, its own gRPC service) are parts the others
// hold; rollouts (a logical cloud's rollout in the resource synchronizer)
// and cloudReader (reads of live logical clouds) are shared helpers.
type LogicalClouds struct {
	unimplemented
	*Clouds
	*ControlPlanes
	*Lifecycle
	*References
	*Kubeconfigs
	*QuotaUsage
	*Facts
	*Users
	*Labels
	// Peers gives multi-cluster meshes their remote secrets (meshpeers.go).
	Peers   *MeshPeers
	traffic *TrafficRollouts
}

// unimplemented answers the RPCs no part serves; one level down, so that
// the parts' methods, one level up, win.
type unimplemented struct {
	corev1.UnimplementedLogicalCloudServiceServer
}

// Settings are the installation's settings of the logical clouds' parts.
type Settings struct {
	// Tenancy is the installation's isolation settings (reserved
	// namespaces, quota maximum).
	Tenancy Tenancy
	// TokenLifetime is the lifetime of the token in a token user's
	// kubeconfig; 0 leaves it to rsync (24 hours).
	TokenLifetime time.Duration
	// CertRenewPercent is the share of a user certificate's life after
	// which a kubeconfig read renews it (RsyncService/RenewCertificate).
	CertRenewPercent int
	// WatchMax is the longest a status watch runs (DCM_WATCH_MAX); 0 is
	// no maximum.
	WatchMax time.Duration
	// MaxMeshes is how many logical clouds of a project may have the
	// service mesh enabled (DCM_MAX_MESHES_PER_PROJECT, meshlimit.go); 0
	// is no maximum.
	MaxMeshes int
	// ClusterSets admits the clusters each project may use (clustersets.go);
	// nil: sets on st with no default set.
	ClusterSets *ClusterSets
}

// NewLogicalClouds opens the collections on st and wires the parts.
func NewLogicalClouds(st *store.Store, peers Peers, set Settings, log *zap.Logger) *LogicalClouds {
	ls := newLockStore(st, log)
	// lockStore, locks and meshLocks serialize the transitions of one
	// logical cloud, and the changes of one cluster's mesh record and its
	// CRD rollout (mesh.go), across core replicas (locks.go).
	locks := newKeyLocks(ls, "lc", 0, func(name string) string {
		return "another transition of " + name + " is in progress on another core replica"
	})
	// A mesh record changes in a moment: a transition waits for
	// another replica's change of it before refusing.
	meshLocks := newKeyLocks(ls, "mesh", 10*time.Second, func(name string) string {
		return "the mesh record of " + name + " is being changed by another core replica"
	})
	reader := &cloudReader{projects: projectRecords(st), clouds: cloudRecords(st)}
	ro := &rollouts{rsync: peers.RsyncInternal, log: log}
	refs := store.NewRecords(st, ClusterReferencesCollection, "cluster reference",
		func() *corev1.ClusterReference { return &corev1.ClusterReference{} })
	facts := &Facts{clouds: reader.clouds, refs: refs, locks: locks, peers: peers.Facts, log: log}
	sets := set.ClusterSets
	if sets == nil {
		sets = NewClusterSets(st, peers.Rsync, peers.RsyncInternal, "", log)
	}
	references := &References{cloudReader: reader, refs: refs, sets: sets,
		kvs:   store.NewRecords(st, KvPairsCollection, "kv pair", func() *corev1.StoredKvPair { return &corev1.StoredKvPair{} }),
		rsync: peers.RsyncInternal, facts: facts, log: log}
	meshes := &Meshes{clouds: reader.clouds, meshLocks: meshLocks, rsync: peers.RsyncInternal, meshInternal: peers.MeshInternal, log: log,
		meshes: store.NewRecords(st, MeshClustersCollection, "mesh cluster",
			func() *corev1.StoredMeshCluster { return &corev1.StoredMeshCluster{} }),
		maxMeshes: set.MaxMeshes}
	traffic := &TrafficRollouts{reader: reader, rollouts: ro, references: references, records: trafficRecords(st),
		rsync: peers.Rsync, traffic: peers.Traffic, trafficInternal: peers.TrafficInternal, mesh: peers.Mesh,
		locks: newKeyLocks(ls, "traffic", 0, func(name string) string {
			return "another transition of " + name + " is in progress on another core replica"
		})}
	clouds := &Clouds{cloudReader: reader, rollouts: ro, locks: locks,
		namespaces: peers.Namespaces, users: peers.Users, usersInternal: peers.UsersInternal, quotas: peers.Quotas,
		quotasInternal: peers.QuotasInternal, rsync: peers.RsyncInternal, meshInternal: peers.MeshInternal, caDist: peers.CaDistInternal,
		trafficInternal: peers.TrafficInternal,
		facts:           facts, references: references, meshes: meshes, traffic: traffic, log: log, tenancy: set.Tenancy}
	users := &Users{cloudReader: reader, locks: locks, users: peers.Users, usersInternal: peers.UsersInternal, quotas: peers.Quotas,
		facts: facts, log: log, tenancy: set.Tenancy}
	clouds.userAdder = users
	lifecycle := &Lifecycle{cloudReader: reader, rollouts: ro, locks: locks, namespaces: peers.Namespaces, quotas: peers.QuotasInternal,
		users: peers.UsersInternal, meshInternal: peers.MeshInternal, references: references, meshes: meshes, traffic: traffic,
		log: log, watchMax: set.WatchMax}
	return &LogicalClouds{
		Clouds:        clouds,
		Users:         users,
		ControlPlanes: &ControlPlanes{cloudReader: reader, lcs: clouds, meshes: meshes, meshInternal: peers.MeshInternal, tenancy: set.Tenancy},
		Lifecycle:     lifecycle,
		References:    references,
		Kubeconfigs: &Kubeconfigs{cloudReader: reader, rollouts: ro, references: references, users: peers.UsersInternal,
			rsync: peers.RsyncInternal, log: log, tokenLifetime: set.TokenLifetime, certRenewPercent: set.CertRenewPercent},
		QuotaUsage: &QuotaUsage{cloudReader: reader, rollouts: ro, rsync: peers.RsyncInternal},
		Facts:      facts,
		Labels: &Labels{cloudReader: reader, lifecycle: lifecycle, references: references, facts: facts, locks: locks,
			rsync: peers.RsyncInternal, registry: peers.Rsync, log: log},
		Peers: &MeshPeers{cloudReader: reader, rollouts: ro, locks: locks, log: log.Named("mesh-peers"), now: time.Now,
			given: map[string]peersGiven{}},
		traffic: traffic,
	}
}

// Clouds is the create, read, update and delete of logical clouds, and the
// cascade that removes a logical cloud from every service.
type Clouds struct {
	*cloudReader
	*rollouts
	locks          *keyLocks
	namespaces     namespacev1.NamespaceInternalServiceClient
	users          userv1.UserServiceClient
	usersInternal  userv1.UserInternalServiceClient
	quotas         quotav1.QuotaServiceClient
	quotasInternal quotav1.QuotaInternalServiceClient
	rsync          rsyncv1.RsyncInternalServiceClient
	meshInternal   servicemeshv1.ServiceMeshInternalServiceClient
	caDist         cadistv1.CaDistInternalServiceClient
	// trafficInternal purges a deleted logical cloud's traffic intent
	// groups; traffic holds core's records of the applied ones.
	trafficInternal trafficv1.TrafficInternalServiceClient
	facts           *Facts
	// userAdder adds users to an existing logical cloud (seed 002's
	// second POST of the same name).
	userAdder  *Users
	references *References
	meshes     *Meshes
	traffic    *TrafficRollouts
	log        *zap.Logger
	// Tenancy is the installation's isolation settings (reserved
	// namespaces, quota maximum).
	tenancy Tenancy
}

// cloudReader reads live logical clouds (and, for the references between
// them, the stored ones): every part that answers under a logical cloud
// holds one.
type cloudReader struct {
	projects *store.Records[*corev1.Project]
	clouds   *store.Records[*corev1.LogicalCloud]
}

func projectRecords(st *store.Store) *store.Records[*corev1.Project] {
	return store.NewRecords(st, ProjectsCollection, "project", func() *corev1.Project { return &corev1.Project{} })
}

func cloudRecords(st *store.Store) *store.Records[*corev1.LogicalCloud] {
	return store.NewRecords(st, LogicalCloudsCollection, "logical cloud", func() *corev1.LogicalCloud { return &corev1.LogicalCloud{} })
}

// Register serves the API on r.
func (s *LogicalClouds) Register(r grpc.ServiceRegistrar) {
	corev1.RegisterLogicalCloudServiceServer(r, s)
}

// cloud reads a live logical cloud: NotFound if it, or its project, is
// missing or being deleted.
func (s *cloudReader) cloud(ctx context.Context, project, lc string) (*corev1.LogicalCloud, error) {
	c, err := s.versioned(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	return c.Msg, nil
}

// CreateLogicalCloud implements corev1.LogicalCloudServiceServer. The
// whole body is checked first; then the logical cloud is stored and its
// namespace, users, permissions, quotas and cluster references are made
// in their services. If any of that fails, what was made is removed again
// (retried in the background if a service is down) and the error returned.
func (s *Clouds) CreateLogicalCloud(ctx context.Context, req *corev1.CreateLogicalCloudRequest) (*corev1.CreateLogicalCloudResponse, error) {
	// Seed 002's flat body naming an existing logical cloud adds its
	// users (docs/logical-clouds.md, "Users"). Whether it exists is read
	// first only where a create would call another service before its
	// insert (cluster-labels select clusters); otherwise the insert tells
	// (its unique id), and the record is read only when it is taken or
	// when the body is no create's.
	flat := req.GetName() != "" && req.GetMetadata() == nil && req.GetSpec() == nil
	readFirst := flat && req.GetClusterLabels() != ""
	if readFirst {
		cur, err := s.cloud(ctx, req.GetProject(), req.GetName())
		switch {
		case err == nil:
			return s.addedUsers(ctx, req, cur)
		case errs.Code(err) != codes.NotFound:
			return nil, err
		}
	}
	// existing answers a flat body's request for logical cloud cur when it
	// exists, as addedUsers; otherwise err, the create's answer, stands.
	existing := func(err error) (*corev1.CreateLogicalCloudResponse, error) {
		if !flat || readFirst {
			return nil, err
		}
		cur, cerr := s.clouds.Get(ctx, store.Key(req.GetProject(), req.GetName()))
		if cerr != nil {
			return nil, err
		}
		return s.addedUsers(ctx, req, cur.Msg)
	}
	p, err := planCreate(req, grants{Tenancy: s.tenancy, mayGrant: server.MayGrant(ctx)})
	if err != nil {
		return existing(err)
	}
	if err := s.checkCARoot(ctx, req.GetProject(), p.lc.GetSpec().GetCaRoot()); err != nil {
		return nil, err
	}
	if refs := req.GetSpec().GetAllowIngressFrom(); len(refs) > 0 {
		if p.lc.Spec.AllowIngressFrom, err = s.checkIngressFrom(ctx, req.GetProject(), p.lc.GetMetadata().GetName(), p.lc.GetSpec().GetLevel(), refs, nil); err != nil {
			return nil, err
		}
	}
	if p.lc.GetSpec().GetServiceMesh().GetEnabled() {
		var release func()
		if ctx, release, err = s.meshes.meshSlot(ctx, req.GetProject(), p.lc.GetMetadata().GetName()); err != nil {
			return nil, err
		}
		defer release()
	}
	if taken, err := s.create(ctx, req.GetProject(), p, nil); err != nil {
		if taken {
			return existing(err)
		}
		return nil, err
	}
	name := p.lc.GetMetadata().GetName()
	resp := &corev1.CreateLogicalCloudResponse{
		Name: name, LogicalCloudName: name, Namespace: p.lc.GetSpec().GetNamespace(),
		UserName: p.lc.GetSpec().GetUser().GetUserName(), User: p.lc.GetSpec().GetUser().GetUserName(),
		LogicalCloud: proto.CloneOf(p.lc),
	}
	resp.LogicalCloud.Lifecycle.State = StateCreated
	if hasUserPermissions(resp.LogicalCloud) {
		// What createParts made in the user service, as stored there.
		resp.LogicalCloud.Spec.User.UserPermissions = byName(slices.Clone(p.perms))
	}
	resp.Message = createdMessage(p)
	return resp, nil
}

// addedUsers adds the users of seed 002's flat body to existing logical
// cloud cur, and answers as a create does.
func (s *Clouds) addedUsers(ctx context.Context, req *corev1.CreateLogicalCloudRequest, cur *corev1.LogicalCloud) (*corev1.CreateLogicalCloudResponse, error) {
	c, added, err := s.userAdder.addToExisting(ctx, req, cur)
	if err != nil {
		return nil, err
	}
	s.shown(ctx, req.GetProject(), c)
	name := c.GetMetadata().GetName()
	return &corev1.CreateLogicalCloudResponse{
		Name: name, LogicalCloudName: name, Namespace: c.GetSpec().GetNamespace(),
		UserName: added[0].GetName(), User: added[0].GetName(), Message: addedMessage, LogicalCloud: c,
	}, nil
}

// createdMessage is the 201 body's message for plan p (seed 002's words).
func createdMessage(p *plan) string {
	if p.lc.GetSpec().GetUser().GetUserName() != "" {
		return "logical cloud and associated user successfully created"
	}
	return "logical cloud created"
}

// create stores planned logical cloud p of project and makes its parts in
// the other services. first, if given, runs once the record is stored and
// before the parts are made (a check of another service that must pass for
// the logical cloud to stay). If anything fails, what was made is removed
// again (retried in the background if a service is down); taken says the
// failure was the id being taken (AlreadyExists from the insert).
//
// The logical cloud's transition lock is held from before the insert to
// the first tell of its facts: every removal takes it before it marks
// the record, so nothing can have changed the record meanwhile, and the
// facts are told from the record as planned, not read again.
func (s *Clouds) create(ctx context.Context, project string, p *plan, first func(context.Context) error) (taken bool, err error) {
	name := p.lc.GetMetadata().GetName()
	p.lc.Lifecycle = &corev1.Lifecycle{Phase: phaseCreated}
	var selected []*rsyncv1.SelectedCluster
	if len(p.labels) > 0 {
		resp, err := s.rsync.SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: p.labels})
		if err != nil {
			return false, err
		}
		selected = resp.GetClusters()
		if err := s.references.sets.checkSelected(ctx, project, selected); err != nil {
			return false, err
		}
		for _, sc := range selected {
			// Referenced because of the labels: released when it loses one
			// (labels.go).
			p.lc.Lifecycle.LabelledClusters = append(p.lc.Lifecycle.LabelledClusters, clusterKey(sc.GetProvider(), sc.GetName()))
		}
	}
	stored, err := s.storeAndTell(ctx, project, p.lc, first)
	if !stored {
		return errs.Code(err) == codes.AlreadyExists, err
	}
	if err == nil {
		err = s.createParts(ctx, project, p, selected)
	}
	if err == nil && len(selected) > 0 {
		err = s.facts.retell(ctx, project, name) // with the clusters referenced
	}
	if err != nil {
		s.abandon(ctx, project, name)
		return false, err
	}
	return false, nil
}

// storeAndTell stores new logical cloud lc of project, runs first (if
// given) and tells the services its facts (facts.go: before the parts
// are made, which the services check against them), all under the
// logical cloud's transition lock. stored says whether the record was
// stored: if it was and err is not nil, the caller abandons it.
func (s *Clouds) storeAndTell(ctx context.Context, project string, lc *corev1.LogicalCloud, first func(context.Context) error) (stored bool, err error) {
	name := lc.GetMetadata().GetName()
	lctx, unlock, err := s.locks.lock(ctx, store.Key(project, name), fmt.Sprintf("logical cloud %q", name))
	if err != nil {
		return false, err
	}
	defer unlock()
	err = s.clouds.CreateChecked(lctx, store.Key(project, name), project, lc, func(ctx context.Context) error {
		_, err := s.projects.Get(ctx, project)
		return err
	})
	if err != nil {
		return false, err
	}
	if first != nil {
		if err := first(lctx); err != nil {
			return true, err
		}
	}
	return true, s.facts.tellNew(lctx, project, lc)
}

// createParts makes what the plan puts in the other services, in order.
func (s *Clouds) createParts(ctx context.Context, project string, p *plan, selected []*rsyncv1.SelectedCluster) error {
	lc := p.lc.GetMetadata().GetName()
	if ns := p.lc.GetSpec().GetNamespace(); ns != "" {
		if _, err := s.namespaces.CreateNamespace(ctx, &namespacev1.CreateNamespaceRequest{
			Project: project, LogicalCloud: lc, Namespace: &namespacev1.Namespace{Name: ns}}); err != nil {
			return err
		}
	}
	// A permission granted to one user alone is made with it (one call,
	// the facts read once); the others once every user is there.
	alone := func(perm *userv1.UserPermission, u *userv1.User) bool {
		return len(perm.GetUsers()) == 1 && perm.GetUsers()[0] == u.GetName()
	}
	for _, u := range p.users {
		var with []*userv1.UserPermission
		for _, perm := range p.perms {
			if alone(perm, u) {
				with = append(with, perm)
			}
		}
		if _, err := s.usersInternal.CreateUser(ctx, &userv1.CreateUserRequest{Project: project, LogicalCloud: lc, User: u, UserPermissions: with}); err != nil {
			return err
		}
	}
	for _, perm := range p.perms {
		if slices.ContainsFunc(p.users, func(u *userv1.User) bool { return alone(perm, u) }) {
			continue
		}
		if _, err := s.users.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{
			Project: project, LogicalCloud: lc, UserPermission: perm}); err != nil {
			return err
		}
	}
	for i, q := range p.quotas {
		if _, err := s.quotas.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: project, LogicalCloud: lc, Quota: q}); err != nil {
			return inBody(err, "quota.spec", p.quotaFields[i])
		}
	}
	for _, c := range selected {
		ref := &corev1.ClusterReference{ClusterProvider: c.GetProvider(), ClusterName: c.GetName()}
		if err := s.references.addReference(ctx, project, lc, ref); err != nil {
			return err
		}
	}
	return nil
}

// abandon removes a logical cloud whose creation failed half way. The
// caller may have gone away: the removal runs on regardless.
func (s *Clouds) abandon(ctx context.Context, project, lc string) {
	ctx = context.WithoutCancel(ctx)
	if _, err := s.clouds.MarkDeleting(ctx, store.Key(project, lc)); err != nil {
		logging.FromOr(ctx, s.log).Warn("abandon logical cloud", zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
		return
	}
	s.finishDeleteLocked(ctx, project, lc)
}

// GetLogicalCloud implements corev1.LogicalCloudServiceServer.
func (s *Clouds) GetLogicalCloud(ctx context.Context, req *corev1.GetLogicalCloudRequest) (*corev1.GetLogicalCloudResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	s.shown(ctx, req.GetProject(), c)
	return &corev1.GetLogicalCloudResponse{LogicalCloud: c}, nil
}

// shown completes what answers show of logical clouds cs of project (the
// caller's copies, never stored): the phase in the states' words and the
// state now, the word their status answers (derive), and the user's
// permissions now, the user service's records (permissions.go). A state
// the resource synchronizer cannot tell now, or permissions the user
// service cannot, are left empty rather than failing the read.
func (s *Clouds) shown(ctx context.Context, project string, cs ...*corev1.LogicalCloud) {
	var owners []string
	for _, c := range cs {
		if c.Lifecycle == nil {
			c.Lifecycle = &corev1.Lifecycle{}
		}
		c.Lifecycle.Phase = phaseOf(c)
		if c.Lifecycle.Phase != phaseCreated {
			owners = append(owners, rolloutOwner(project, c.GetMetadata().GetName()))
		}
	}
	var g errgroup.Group
	g.Go(func() error {
		// One call for the page's rollouts (derive).
		rollouts, err := rolloutStates(ctx, s.rsync, owners)
		if err != nil {
			logging.FromOr(ctx, s.log).Info("logical clouds shown without their state: the resource synchronizer did not answer",
				zap.String("project", project), zap.Int("logical_clouds", len(cs)), zap.Error(err))
			return nil
		}
		for _, c := range cs {
			c.Lifecycle.State = derive(c.Lifecycle.Phase, rollouts[rolloutOwner(project, c.GetMetadata().GetName())])
		}
		return nil
	})
	g.Go(func() error {
		// One call for the page's permissions (permissions.go).
		s.showPermissions(ctx, project, cs)
		return nil
	})
	_ = g.Wait()
}

// ListLogicalClouds implements corev1.LogicalCloudServiceServer.
// The project is read only for an empty page (to answer 404 for a
// project that is not there): logical clouds listed under it say that it
// is, since a project is deleted only once it has none (projects.go).
func (s *Clouds) ListLogicalClouds(ctx context.Context, req *corev1.ListLogicalCloudsRequest) (*corev1.ListLogicalCloudsResponse, error) {
	cs, next, err := s.clouds.ListPage(ctx, req.GetProject(), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		if _, err := s.projects.Get(ctx, req.GetProject()); err != nil {
			return nil, err
		}
	}
	s.shown(ctx, req.GetProject(), cs...)
	return &corev1.ListLogicalCloudsResponse{LogicalClouds: cs, NextPageToken: next}, nil
}

// checkCARoot refuses a spec.ca-root the project may not use: a root
// that does not exist (400), or one neither shared nor listing the
// project (403), both naming spec.ca-root. CA distribution decides
// (CheckRoot), and checks again when it signs.
func (s *Clouds) checkCARoot(ctx context.Context, project, root string) error {
	if root == "" {
		return nil
	}
	if s.caDist == nil {
		return errs.Unavailable(nil, "CA distribution is not configured: spec.ca-root cannot be checked")
	}
	_, err := s.caDist.CheckRoot(ctx, &cadistv1.CheckRootRequest{Project: project, Root: root})
	switch errs.Code(err) {
	case codes.OK:
		return nil
	case codes.InvalidArgument:
		return errs.Invalid("spec.ca-root", "no root %q (see GET /v2/cadist/roots)", root)
	case codes.PermissionDenied:
		return errs.Forbidden("spec.ca-root", "root %q is neither shared nor one of project %q's roots: name a root whose projects include the project, or one an admin marked shared", root, project)
	}
	return err
}

// UpdateLogicalCloud implements corev1.LogicalCloudServiceServer: the
// metadata is replaced; a spec, if given, must keep what was fixed at
// creation (the body of a GET can be sent back).
func (s *Clouds) UpdateLogicalCloud(ctx context.Context, req *corev1.UpdateLogicalCloudRequest) (*corev1.UpdateLogicalCloudResponse, error) {
	if n := req.GetMetadata().GetName(); n != req.GetLogicalCloud() {
		return nil, errs.Invalid("metadata.name", "must equal the logical cloud in the path (%q), got %q", req.GetLogicalCloud(), n)
	}
	cur, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	if root := req.GetSpec().GetCaRoot(); root != "" && root != cur.GetSpec().GetCaRoot() {
		if err := s.checkCARoot(ctx, req.GetProject(), root); err != nil {
			return nil, err
		}
	}
	var perms []*userv1.UserPermission
	if in := req.GetSpec().GetUser().GetUserPermissions(); len(in) > 0 {
		// A GET's body sent back holds the permissions it showed: they must
		// be the ones the logical cloud has now.
		if !hasUserPermissions(cur) {
			return nil, errs.Invalid("spec.user.user-permissions", "the logical cloud has no user to grant permissions to")
		}
		if perms, err = s.permissions(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
			return nil, err
		}
	}
	// Checked before the write: the named logical clouds are other records.
	ingress, err := s.checkIngressFrom(ctx, req.GetProject(), req.GetLogicalCloud(), cur.GetSpec().GetLevel(), req.GetSpec().GetAllowIngressFrom(),
		cur.GetSpec().GetAllowIngressFrom())
	if err != nil {
		return nil, err
	}
	if req.GetSpec().GetServiceMesh().GetEnabled() && !cur.GetSpec().GetServiceMesh().GetEnabled() {
		var release func()
		if ctx, release, err = s.meshes.meshSlot(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
			return nil, err
		}
		defer release()
	}
	c, err := s.clouds.Modify(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()), func(c *corev1.LogicalCloud) error {
		if err := keepsSpec(c.GetSpec(), req.GetSpec(), perms); err != nil {
			return err
		}
		if in := req.GetSpec(); in.GetServiceMesh() != nil || in.GetCaRoot() != "" {
			// Like pod security, the mesh and its root take effect on the
			// next .../update: an empty field keeps what is stored.
			want := &corev1.LogicalCloudSpec{ServiceMesh: cmp.Or(in.GetServiceMesh(), c.GetSpec().GetServiceMesh()),
				CaRoot: cmp.Or(in.GetCaRoot(), c.GetSpec().GetCaRoot())}
			mesh, root, err := planMesh(want, c.GetMetadata().GetName(), c.GetSpec().GetLevel(), c.GetSpec().GetNamespace(), s.tenancy.Reserved, meshNamespaceField)
			if err != nil {
				return err
			}
			c.Spec.ServiceMesh, c.Spec.CaRoot = mesh, root
		}
		if ps := req.GetSpec().GetPodSecurity(); ps != "" && ps != c.GetSpec().GetPodSecurity() {
			// Takes effect on the next .../update.
			if err := kube.CheckPodSecurity("spec.pod-security", c.GetSpec().GetLevel(), ps, server.MayGrant(ctx)); err != nil {
				return err
			}
			c.Spec.PodSecurity = ps
		}
		if in := req.GetSpec(); in != nil && in.FollowLabels != nil {
			// Followed (or not) from the next pass over the registry
			// (labels.go); omitted, it is kept.
			if err := checkFollowLabels("spec.follow-labels", c.GetSpec().GetClusterLabels()); err != nil {
				return err
			}
			c.Spec.FollowLabels = in.FollowLabels
		}
		if in := req.GetSpec(); in != nil {
			// Labels are replaced whenever a spec is given (a GET's body sent
			// back keeps them); they take effect on the next .../update.
			if c.GetSpec().GetLevel() == levelAdmin && len(in.GetLabels()) > 0 {
				return errs.Invalid("spec.labels", "an admin logical cloud has no namespace to label")
			}
			if err := kube.CheckLabels("spec.labels", in.GetLabels()); err != nil {
				return err
			}
			c.Spec.Labels = in.GetLabels()
			// Replaced like the labels; the next .../apply or .../update
			// follows it (rollout.go).
			if err := checkRollout("spec.rollout", in.GetRollout()); err != nil {
				return err
			}
			c.Spec.Rollout = in.GetRollout()
			// Replaced like the labels; the clusters' dcm-ingress changes on
			// the next .../update.
			c.Spec.AllowIngressFrom = ingress
		}
		c.Metadata = req.GetMetadata()
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.shown(ctx, req.GetProject(), c)
	return &corev1.UpdateLogicalCloudResponse{LogicalCloud: c}, nil
}

// keepsSpec refuses a spec that would change what is fixed at creation;
// perms are the logical cloud's permissions now (read when in has some).
func keepsSpec(cur, in *corev1.LogicalCloudSpec, perms []*userv1.UserPermission) error {
	if in == nil {
		return nil
	}
	if in.GetLevel() != "" {
		level, err := parseLevel(in.GetLevel())
		if err != nil {
			return err
		}
		if level != cur.GetLevel() {
			return errs.Invalid("spec.level", "is %q and cannot be changed; create another logical cloud", cur.GetLevel())
		}
	}
	if ns := in.GetNamespace(); ns != "" && ns != cur.GetNamespace() {
		return errs.Invalid("spec.namespace", "is %q and cannot be changed; create another logical cloud", cur.GetNamespace())
	}
	u := in.GetUser()
	if n := u.GetUserName(); n != "" && n != cur.GetUser().GetUserName() {
		return errs.Invalid("spec.user.user-name", "is %q and cannot be changed; create another logical cloud", cur.GetUser().GetUserName())
	}
	if t := u.GetType(); t != "" && t != cur.GetUser().GetType() {
		return errs.Invalid("spec.user.type", "is %q and cannot be changed", cur.GetUser().GetType())
	}
	if len(u.GetUserPermissions()) > 0 {
		if err := keepsPermissions(cur, perms, u.GetUserPermissions()); err != nil {
			return err
		}
	}
	if u.GetCertificate() != "" {
		return errs.Invalid("spec.user.certificate", "cannot be changed")
	}
	if l := in.GetClusterLabels(); len(l) > 0 && strings.Join(l, ",") != strings.Join(cur.GetClusterLabels(), ",") {
		return errs.Invalid("spec.cluster-labels", "cannot be changed; add or remove cluster references instead")
	}
	return nil
}

// DeleteLogicalCloud implements corev1.LogicalCloudServiceServer. Only a
// logical cloud that is on no cluster (Created, or Terminated) may go. It
// is marked first, so that nothing can be added under it, then its parts
// are removed in every service and the record last. A service that cannot
// be reached leaves the mark; the cleanup loop finishes the job when it is
// back.
func (s *Clouds) DeleteLogicalCloud(ctx context.Context, req *corev1.DeleteLogicalCloudRequest) (*corev1.DeleteLogicalCloudResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	ctx, unlock, err := s.locks.lock(ctx, store.Key(project, lc), fmt.Sprintf("logical cloud %q", lc))
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	st, err := s.status(ctx, project, lc, c)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(deleteFrom, st.GetState()) {
		return nil, errs.Because(errs.ReasonWrongState, "logical cloud %q is %s: terminate it (POST .../terminate) and wait for %s before deleting it",
			lc, st.GetState(), StateTerminated)
	}
	if _, err := s.clouds.MarkDeleting(ctx, store.Key(project, lc)); err != nil {
		return nil, err
	}
	// Marked first: a spec.allow-ingress-from checked from now on no
	// longer finds it.
	if err := s.deleteRefused(ctx, project, lc); err != nil {
		if uerr := s.clouds.Unmark(context.WithoutCancel(ctx), store.Key(project, lc)); uerr != nil {
			logging.FromOr(ctx, s.log).Warn("unmark logical cloud", zap.String("logical_cloud", store.Key(project, lc)), zap.Error(uerr))
		}
		return nil, err
	}
	s.finishDelete(context.WithoutCancel(ctx), req.GetProject(), req.GetLogicalCloud())
	return &corev1.DeleteLogicalCloudResponse{}, nil
}

// finishDelete removes a marked logical cloud's parts everywhere, then the
// logical cloud. It reports whether all is gone; a failure is logged and
// left to the cleanup loop.
func (s *Clouds) finishDelete(ctx context.Context, project, lc string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	parent := store.Key(project, lc)
	var failed []error
	note := func(what string, err error) {
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", what, err))
		}
	}
	// Told first, so that no service adds under it after its purge
	// (facts.go); a service not told is not purged yet.
	if err := s.facts.tellDeleting(ctx, project, lc); err != nil {
		s.log.Warn("logical cloud removal incomplete; it will be retried",
			zap.String("logical_cloud", parent), zap.Error(err))
		return false
	}
	_, err := s.namespaces.PurgeLogicalCloud(ctx, &namespacev1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc})
	note("namespace service", err)
	_, err = s.usersInternal.PurgeLogicalCloud(ctx, &userv1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc})
	note("user service", err)
	_, err = s.quotasInternal.PurgeLogicalCloud(ctx, &quotav1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc})
	note("quota service", err)
	_, err = s.trafficInternal.PurgeLogicalCloud(ctx, &trafficv1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc})
	note("traffic service", err)
	_, err = s.meshInternal.PurgeLogicalCloud(ctx, &servicemeshv1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc})
	note("service mesh service", err)
	_, err = s.caDist.PurgeLogicalCloud(ctx, &cadistv1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc})
	note("CA distribution service", err)
	// Terminate left the clusters' meshes; an apply that failed half way
	// may still be listed.
	_, err = s.meshes.leaveMesh(ctx, project, lc, nil)
	note("mesh clusters", err)
	_, err = s.rsync.ReleaseClusters(ctx, &rsyncv1.ReleaseClustersRequest{Owner: rolloutOwner(project, lc)})
	note("cluster holds", err)
	note("cluster references and kv pairs", s.references.purge(ctx, parent))
	// Terminated traffic groups' records (an applied group keeps the
	// logical cloud from being terminated, so from being deleted).
	note("traffic rollout records", s.traffic.purge(ctx, parent))
	if len(failed) == 0 {
		// The cascade is done: the services forget it before core does.
		note("logical cloud facts", s.facts.forget(ctx, project, lc))
	}
	if len(failed) == 0 {
		err := s.clouds.Delete(ctx, parent)
		if err == nil || errs.Code(err) == codes.NotFound {
			return true
		}
		failed = append(failed, err)
	}
	s.log.Warn("logical cloud removal incomplete; it will be retried",
		zap.String("logical_cloud", parent), zap.Error(errors.Join(failed...)))
	return false
}

// finishDeleteLocked is finishDelete under the logical cloud's transition
// lock (as DeleteLogicalCloud runs it), so that no Reconcile tells its
// facts meanwhile. A lock another replica holds leaves the removal to the
// cleanup loop.
func (s *Clouds) finishDeleteLocked(ctx context.Context, project, lc string) bool {
	ctx, unlock, err := s.locks.lock(ctx, store.Key(project, lc), fmt.Sprintf("logical cloud %q", lc))
	if err != nil {
		s.log.Warn("logical cloud removal postponed; it will be retried", zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
		return false
	}
	defer unlock()
	return s.finishDelete(ctx, project, lc)
}

// Cleanup retries, every interval until ctx ends, the removal of every
// logical cloud marked for deletion (a service was down, or this program
// stopped half way).
func (s *Clouds) Cleanup(interval time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			pending, err := s.clouds.Deleting(ctx)
			if err != nil {
				s.log.Warn("list logical clouds to remove", zap.Error(err))
				continue
			}
			for _, it := range pending {
				project, lc, _ := strings.Cut(it.ID, "/")
				if s.finishDeleteLocked(ctx, project, lc) {
					s.log.Info("logical cloud removal completed", zap.String("logical_cloud", it.ID))
				}
			}
		}
	}
}

// inBody names, in an InvalidArgument of another service whose field is
// under prefix (the service's request: "quota.spec.limits.memory"), the
// field where the body gave it ("resources.limits.memory"). A quota the
// quota service refuses only there (below the container defaults, which
// core does not know) is then named as the body's other quota errors are.
func inBody(err error, prefix, field string) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return err
	}
	got := errs.FieldOf(st)
	rest, ok := strings.CutPrefix(got, prefix)
	if !ok || (rest != "" && rest[0] != '.') {
		return err
	}
	return errs.Invalid(field+rest, "%s", strings.TrimPrefix(st.Message(), got+": "))
}
