package server

import (
	"net"
	"time"
)

// Config is every DCM program's configuration: defaults, DCM_* environment
// variables, then flags. The all-in-one program and the per-service
// programs share it. docs/configuration.md's table is generated from these
// tags (make generate): the usage text is the table's meaning column.
type Config struct {
	GRPCAddr      string        `env:"DCM_GRPC_ADDR" flag:"grpc-addr" default:"127.0.0.1:9090" usage:"gRPC listen address of the program's services, mutual TLS (empty: no gRPC listener)"`
	HTTPAddr      string        `env:"DCM_HTTP_ADDR" flag:"http-addr" default:"127.0.0.1:8080" usage:"listen address of REST (the gateway; HTTPS unless DCM_INSECURE_HTTP), /metrics and /healthz"`
	MetricsAddr   string        `env:"DCM_METRICS_ADDR" flag:"metrics-addr" usage:"listen address of a plain-HTTP listener serving GET /metrics alone, without a credential, for a Prometheus server to scrape (empty: none, the default: make run and the tests run programs side by side, where a fixed port collides; deploy/ sets 0.0.0.0:9102, open to the monitoring namespace only). The series name clusters and routes: let only scrapers reach it. DCM_HTTP_ADDR's /metrics stays, authenticated"`
	DataDir       string        `env:"DCM_DATA_DIR" flag:"data-dir" default:".dcm" usage:"directory of the embedded store (<dir>/store/), the local PKI (<dir>/pki/) and keyring (<dir>/kek)"`
	MongoURI      string        `env:"DCM_MONGO_URI" secret:"true" usage:"MongoDB URI with its credentials, e.g. mongodb://dcm-core:<password>@h1,h2,h3/?replicaSet=rs0&tls=true (empty, with DCM_MONGO_URI_FILE empty: the embedded store); environment only, never a flag"`
	MongoURIFile  string        `env:"DCM_MONGO_URI_FILE" flag:"mongo-uri-file" usage:"file holding the MongoDB URI (e.g. a mounted Kubernetes Secret; surrounding white space is trimmed), instead of DCM_MONGO_URI"`
	MongoDatabase string        `env:"DCM_MONGO_DATABASE" flag:"mongo-database" default:"dcm" usage:"database name"`
	LogLevel      string        `env:"DCM_LOG_LEVEL" flag:"log-level" default:"info" usage:"debug, info, warn or error"`
	LogFormat     string        `env:"DCM_LOG_FORMAT" flag:"log-format" default:"json" usage:"json (one object per line, for collectors) or console (aligned text, for people reading a terminal)"`
	ShutdownGrace time.Duration `env:"DCM_SHUTDOWN_GRACE" flag:"shutdown-grace" default:"10s" usage:"time in-flight requests get to finish on SIGTERM"`

	// Bounds on what one HTTP client may hold (docs/security.md "Limits").
	MaxBodyBytes     int           `env:"DCM_MAX_BODY_BYTES" flag:"max-body-bytes" default:"4194304" usage:"largest HTTP request body in bytes; a larger one is refused with 413 and never read past the limit"`
	HTTPReadTimeout  time.Duration `env:"DCM_HTTP_READ_TIMEOUT" flag:"http-read-timeout" default:"30s" usage:"time an HTTP client gets to send a whole request, headers and body; a slower one is disconnected"`
	HTTPWriteTimeout time.Duration `env:"DCM_HTTP_WRITE_TIMEOUT" flag:"http-write-timeout" default:"60s" usage:"time an HTTP response gets to be written, from the end of the request's headers (status watch streams are bounded by DCM_WATCH_MAX instead)"`
	HTTPIdleTimeout  time.Duration `env:"DCM_HTTP_IDLE_TIMEOUT" flag:"http-idle-timeout" default:"120s" usage:"time an idle keep-alive HTTP connection is kept open"`
	WatchMax         time.Duration `env:"DCM_WATCH_MAX" flag:"watch-max" default:"30m" usage:"longest a status watch (GET .../status?watch=true) runs before its stream ends cleanly; the client watches again to go on. Read by core and the gateway"`
	MaxWatches       int           `env:"DCM_MAX_WATCHES" flag:"max-watches" default:"16" usage:"status watches one credential (identity: subject, role, project, certificate or token) may have open at once; past it, 429 (0: no maximum). Read by the gateway"`
	// GatewayDialect is how the gateway answers a request that does not
	// say (docs/emco.md "Dialects").
	GatewayDialect string `env:"DCM_GATEWAY_DIALECT" flag:"gateway-dialect" default:"dcm" usage:"the REST dialect the gateway answers in when a request names none (header Dcm-Dialect) and its body used no EMCO spelling: dcm (the project's JSON keys) or emco (EMCO's DCM API shapes, for EMCO's clients). Read by the gateway"`
	// Failed REST authentications per client address, refused before any
	// store read (docs/security.md "Limits").
	AuthFailureBurst  int           `env:"DCM_AUTH_FAILURE_BURST" flag:"auth-failure-burst" default:"10" usage:"failed REST authentications one client address (IP; IPv6: its /64) may have at once before it is refused with 429 and Retry-After, whatever it presents, without a store read (0: no limit). Read by the gateway"`
	AuthFailureRefill time.Duration `env:"DCM_AUTH_FAILURE_REFILL" flag:"auth-failure-refill" default:"1s" usage:"time in which a client address regains one failed authentication of DCM_AUTH_FAILURE_BURST. Read by the gateway"`
	// CleanupInterval paces the retries of removals a down service left
	// unfinished (a deleted logical cloud's parts).
	CleanupInterval time.Duration `env:"DCM_CLEANUP_INTERVAL" flag:"cleanup-interval" default:"5s" usage:"how often core retries removing a deleted logical cloud's parts from a service that was down"`
	// FactsInterval paces core's reconcile of the logical clouds' facts it
	// tells the namespace, user, quota and traffic services.
	FactsInterval time.Duration `env:"DCM_FACTS_INTERVAL" flag:"facts-interval" default:"1m" usage:"how often core tells the namespace, user, quota and traffic services the facts of every logical cloud again (a service that missed a tell converges)"`
	// LabelsInterval paces core's reconcile of the logical clouds that
	// follow their cluster-labels (docs/logical-clouds.md "Clusters by
	// label"), besides the registry changes rsync streams.
	LabelsInterval time.Duration `env:"DCM_LABELS_INTERVAL" flag:"labels-interval" default:"1m" usage:"how often core compares every logical cloud that follows its cluster-labels with the cluster registry, besides acting on each registry change rsync streams (a change missed while core was down or disconnected converges). Read by core"`
	// MeshPeersInterval paces core's remote secrets: each cluster's istiod
	// of a mesh logical cloud on several clusters reads the others'
	// endpoints with a token of their reader (docs/mesh.md "Across
	// clusters").
	MeshPeersInterval time.Duration `env:"DCM_MESH_PEERS_INTERVAL" flag:"mesh-peers-interval" default:"30s" usage:"how often core gives every cluster of an Instantiated mesh logical cloud on several clusters a remote secret of each other cluster (a kubeconfig with a token of its istio-reader-service-account, renewed at half its 24h life), once their readers are applied. Read by core"`
	// TokenLifetime is how long the ServiceAccount token in a token user's
	// kubeconfig lasts (core asks rsync for a fresh one per kubeconfig).
	TokenLifetime time.Duration `env:"DCM_TOKEN_LIFETIME" flag:"token-lifetime" default:"24h" usage:"lifetime of the bound ServiceAccount token (TokenRequest API) in a token user's kubeconfig, 10m to 720h. Read by core"`
	// DefaultQuota is the quota of a logical cloud that has none of its own.
	DefaultQuota string `env:"DCM_DEFAULT_QUOTA" flag:"default-quota" default:"cpu=8,memory=32Gi,pods=100" usage:"ResourceQuota hard map of a logical cloud with no quota of its own, as resource=quantity,... (empty: none). Read by the quota service; a bad value stops it at start"`
	// ContainerDefaultRequest and ContainerDefaultLimit are what each
	// logical cloud's LimitRange gives a container that states no
	// requests or limits, unless the logical cloud sets its own
	// (.../container-defaults).
	ContainerDefaultRequest string `env:"DCM_CONTAINER_DEFAULT_REQUEST" flag:"container-default-request" default:"cpu=100m,memory=128Mi" usage:"requests of a container that states none, in every logical cloud's LimitRange (defaultRequest) unless it sets its own, as cpu=quantity,memory=quantity (a resource left out: none). Read by the quota service; a value above DCM_DEFAULT_QUOTA (cpu, memory, requests.*) or above DCM_CONTAINER_DEFAULT_LIMIT stops it at start"`
	ContainerDefaultLimit   string `env:"DCM_CONTAINER_DEFAULT_LIMIT" flag:"container-default-limit" default:"cpu=500m,memory=256Mi" usage:"limits of a container that states none, in every logical cloud's LimitRange (default) unless it sets its own, as cpu=quantity,memory=quantity (a resource left out: none). Read by the quota service; a value above DCM_DEFAULT_QUOTA (limits.*) stops it at start"`
	// CertLifetime is how long the client certificates of logical clouds'
	// users are valid (their CSRs' spec.expirationSeconds).
	CertLifetime time.Duration `env:"DCM_CERT_LIFETIME" flag:"cert-lifetime" default:"168h" usage:"lifetime of the client certificates clusters issue to logical clouds' certificate users (their CSRs' spec.expirationSeconds; the signer caps it at its own maximum). Read by the user service; below 10m (the signers' minimum) it stops at start"`
	// CertRenewPercent is how much of a certificate's life may pass before
	// a kubeconfig read has the cluster issue a fresh one.
	CertRenewPercent int `env:"DCM_CERT_RENEW_PERCENT" flag:"cert-renew-percent" default:"50" usage:"share of a user certificate's life (1 to 99 percent) after which reading a kubeconfig has the cluster issue a fresh one. Read by core"`

	// The CA distribution service's intermediates (docs/mesh.md).
	CAIntermediateLifetime time.Duration `env:"DCM_CA_INTERMEDIATE_LIFETIME" flag:"ca-intermediate-lifetime" default:"8760h" usage:"lifetime of a logical cloud's per-cluster intermediate CA (never beyond its root's expiry). Read by the CA distribution service"`
	CARevokedRetention     time.Duration `env:"DCM_CA_REVOKED_RETENTION" flag:"ca-revoked-retention" default:"720h" usage:"how long the record of a revoked intermediate CA (rotated away, a cluster left, a terminated mesh) is kept after its revocation; then it is deleted, but for the newest of each cluster (its generation number is never reused). Read by the CA distribution service"`
	CAOverlap              time.Duration `env:"DCM_CA_OVERLAP" flag:"ca-overlap" default:"24h" usage:"time after a logical cloud's root changed (rotation, or a new spec.ca-root) during which its bundles trust the old root too; after it, the next issue or bundle read drops the old root. Read by the CA distribution service"`

	// The service mesh service's control planes (docs/mesh.md).
	IstioHub            string `env:"DCM_ISTIO_HUB" flag:"istio-hub" default:"docker.io/istio" usage:"image registry of istiod and the Envoy proxies of logical clouds' service meshes (Istio's global.hub). Read by the service mesh service"`
	IstioTag            string `env:"DCM_ISTIO_TAG" flag:"istio-tag" default:"1.31.0" usage:"image tag of istiod and the Envoy proxies (Istio's global.tag), the release of the charts DCM renders (the 1.31 line). Read by the service mesh service"`
	MaxMeshesPerProject int    `env:"DCM_MAX_MESHES_PER_PROJECT" flag:"max-meshes-per-project" default:"10" usage:"how many logical clouds of one project may have the service mesh enabled (each puts an istiod and three gateways on every cluster it spans); one more is refused with 409 MESH_LIMIT naming spec.service-mesh (0: no maximum). Read by core"`
	MeshTrustDomain     string `env:"DCM_MESH_TRUST_DOMAIN" flag:"mesh-trust-domain" default:"dcm.local" usage:"suffix of each logical cloud's Istio trust domain, <logical cloud>.<project>.<suffix>: the SPIFFE identities its workloads get and the name constraint of its intermediates. Read by the service mesh service"`

	// The traffic controller's external-dns runs (docs/traffic.md).
	DNSInterval time.Duration `env:"DCM_DNS_INTERVAL" flag:"dns-interval" default:"1m" usage:"how often the traffic controller runs external-dns for each published DNS name (each run reads the DNSEndpoint records of its clusters and brings the DNS provider in step; a terminated group's runs delete their records at the next one). Read by the traffic controller"`

	// Tenant isolation: what only an admin may go beyond.
	MaxQuota           string `env:"DCM_MAX_QUOTA" flag:"max-quota" usage:"largest quantity per resource a non-admin may set in a quota, as resource=quantity,... (empty: no maximum); resources the default quota leaves out are bounded by it too. Read by core and the quota service"`
	ReservedNamespaces string `env:"DCM_RESERVED_NAMESPACES" flag:"reserved-namespaces" default:"ingress-nginx,nginx-ingress,ingress,traefik,kong,haproxy-controller,contour,projectcontour,envoy-gateway-system,istio-system,istio-ingress,istio-gateways,linkerd,linkerd-viz,linkerd-jaeger,cilium,cilium-*,tigera-operator,calico-system,calico-apiserver,metallb-system,cert-manager,external-dns,external-secrets,sealed-secrets,vault,monitoring,prometheus,grafana,loki,tempo,jaeger,observability,opentelemetry-operator-system,logging,elastic-system,kubernetes-dashboard,metrics-server,argocd,argo,argo-rollouts,argo-events,argo-workflows,flux-system,tekton-pipelines,gatekeeper-system,kyverno,falco,trivy-system,velero,keda,knative-serving,knative-eventing,crossplane-system,capi-system,cattle-system,cattle-*,rook-ceph,longhorn-system,local-path-storage,openebs,olm,operators,openshift,openshift-*" usage:"namespaces no logical cloud may use besides kube-*, default and *-system, comma-separated; an entry ending in * reserves every name it starts. The default holds the namespaces of common cluster add-ons (ingress controllers, service meshes, CNI, certificates, secrets, monitoring and logging, GitOps, policy, backup, storage, operators); setting it replaces the whole list, so keep the defaults you still want. It applies to new logical clouds (and their service mesh namespaces) only. Read by core"`
	PodSecurity        string `env:"DCM_POD_SECURITY" flag:"pod-security" default:"baseline" usage:"Pod Security Admission level a new logical cloud gets when its body sets none: baseline or restricted (privileged only per logical cloud, by an admin); stored with it as spec.pod-security. Read by core, and by the namespace service for logical clouds made before the setting"`
	TenantEgressCIDRs  string `env:"DCM_TENANT_EGRESS_CIDRS" flag:"tenant-egress-cidrs" usage:"CIDRs outside the cluster that the pods of every logical cloud may reach, comma-separated (e.g. 10.20.0.0/16,2001:db8::/48); empty: none, only the namespaces of logical clouds and cluster DNS (each logical cloud's NetworkPolicy dcm-egress; docs/logical-clouds.md). A CIDR that does not parse stops the program at start-up. Read by the namespace service"`
	DefaultClusterSet  string `env:"DCM_DEFAULT_CLUSTER_SET" flag:"default-cluster-set" default:"default" usage:"name of the cluster set of every registered cluster (all-clusters) that core makes at start when no cluster set exists yet, binding it to every project then; each new project is bound to it while it exists. Empty: none made, none bound, so a new project may use no cluster until an admin binds it a set (docs/fleet.md, Cluster sets). Read by core"`

	// The resource synchronizer's engine.
	RsyncConcurrency    int           `env:"DCM_RSYNC_CONCURRENCY" flag:"rsync-concurrency" default:"512" usage:"how many clusters the resource synchronizer works on at once"`
	RsyncRetryBase      time.Duration `env:"DCM_RSYNC_RETRY_BASE" flag:"rsync-retry-base" default:"1s" usage:"first retry delay of a failed apply or delete; it doubles per attempt, drawn from the upper half of each delay (jitter)"`
	RsyncRetryMax       time.Duration `env:"DCM_RSYNC_RETRY_MAX" flag:"rsync-retry-max" default:"5m" usage:"cap on the retry delay"`
	RsyncForceConflicts bool          `env:"DCM_RSYNC_FORCE_CONFLICTS" flag:"rsync-force-conflicts" default:"false" usage:"server-side apply takes over fields another field manager owns, instead of reporting the conflict as a failure (never another owner's object)"`
	RsyncReplica        string        `env:"DCM_RSYNC_REPLICA" flag:"rsync-replica" usage:"this resource synchronizer replica's name among those sharing a store (empty: host name and process id); a replica restarted under the same name takes its clusters back at once, so two live replicas must never share one (a StatefulSet's pod name, or the host name in a Deployment whose pods restart in place)"`
	RsyncShards         int           `env:"DCM_RSYNC_SHARDS" flag:"rsync-shards" default:"64" usage:"how many shards the clusters are split into among resource synchronizer replicas (the same for every replica of a store)"`
	RsyncLeaseTTL       time.Duration `env:"DCM_RSYNC_LEASE_TTL" flag:"rsync-lease-ttl" default:"8s" usage:"how long a replica's lease on a shard of clusters lasts unrenewed: a dead replica's clusters are taken over within it; renewed every fifth of it"`

	// Cluster health probes (the resource synchronizer, docs/fleet.md).
	ClusterProbeInterval    time.Duration `env:"DCM_CLUSTER_PROBE_INTERVAL" flag:"cluster-probe-interval" default:"30s" usage:"how often the resource synchronizer probes each registered cluster's API server (GET /readyz with the cluster's own credentials, from the replica holding its shard; each probe is jittered by up to a tenth of it) for the cluster's status.state (docs/fleet.md); 0 disables probing and every cluster shows Unknown"`
	ClusterProbeConcurrency int           `env:"DCM_CLUSTER_PROBE_CONCURRENCY" flag:"cluster-probe-concurrency" default:"32" usage:"how many cluster probes one resource synchronizer replica runs at once (apart from DCM_RSYNC_CONCURRENCY, so probes never hold a rollout's slot)"`

	// TLS. With the three files unset, a local CA and certificates are made
	// under DataDir/pki on first start and used from then on.
	TLSCAFile    string `env:"DCM_TLS_CA_FILE" flag:"tls-ca-file" usage:"PEM CA bundle client and peer certificates must chain to (empty, with the next two: the local PKI under <data dir>/pki/, made on first start)"`
	TLSCertFile  string `env:"DCM_TLS_CERT_FILE" flag:"tls-cert-file" usage:"PEM certificate the program serves gRPC and dials with (server and client use; organization service; common name the program's name, e.g. core, or dcm for the all-in-one program)"`
	TLSKeyFile   string `env:"DCM_TLS_KEY_FILE" flag:"tls-key-file" usage:"PEM private key of DCM_TLS_CERT_FILE"`
	InsecureGRPC bool   `env:"DCM_INSECURE_GRPC" flag:"insecure-grpc" default:"false" usage:"serve and dial gRPC in plaintext, without mutual TLS; the allow-lists are checked against the program a call names (metadata dcm-insecure-program), a claim no certificate proves; development only, refused unless DCM_GRPC_ADDR is a loopback address"`
	InsecureHTTP bool   `env:"DCM_INSECURE_HTTP" flag:"insecure-http" default:"false" usage:"serve plain HTTP instead of HTTPS; development only, refused unless DCM_HTTP_ADDR is a loopback address; bearer tokens are still required"`
	// AdminTokenFile holds the bootstrap admin bearer token the gateway accepts.
	AdminTokenFile string `env:"DCM_ADMIN_TOKEN_FILE" flag:"admin-token-file" usage:"file holding the bootstrap admin bearer token the gateway accepts (empty: <data dir>/pki/admin.token with the local PKI)"`

	// TLSServiceCAFile pins who may issue service identities.
	TLSServiceCAFile string `env:"DCM_TLS_SERVICE_CA_FILE" flag:"tls-service-ca-file" usage:"PEM bundle that certificates with the organization service must chain to, the installation's service CA: callers' and the servers a program dials; others of DCM_TLS_CA_FILE may issue admins' certificates only (empty: the CA of DCM_TLS_CA_FILE that issued DCM_TLS_CERT_FILE; the local CA with the local PKI)"`
	// HTTPTLSCertFile is the HTTPS listener's certificate: never one that
	// can also authenticate as a DCM program.
	HTTPTLSCertFile string `env:"DCM_HTTP_TLS_CERT_FILE" flag:"http-tls-cert-file" usage:"PEM certificate of the HTTPS listener, server use only: one with client-auth usage or organization service is refused where REST is served (empty: <data dir>/pki/https.crt with the local PKI; with configured files, DCM_TLS_CERT_FILE, which a program serving REST refuses)"`
	HTTPTLSKeyFile  string `env:"DCM_HTTP_TLS_KEY_FILE" flag:"http-tls-key-file" usage:"PEM private key of DCM_HTTP_TLS_CERT_FILE"`

	// Key-encryption keys for secrets at rest, one "<id>:<base64 32 bytes>"
	// per line, the first one current. With both unset, DataDir/kek is made
	// on first start.
	KEK     string `env:"DCM_KEK" secret:"true" usage:"the key-encryption keyring itself, instead of a file; environment only, never a flag"`
	KEKFile string `env:"DCM_KEK_FILE" flag:"kek-file" usage:"key-encryption keyring for secrets at rest: lines <id>:<base64 of 32 bytes> (root keys) or <id>@<service>:<base64> (one service's keys, see dcm-kek derive), the first one current (empty, with DCM_KEK empty: <data dir>/kek, made on first start)"`

	// Where each service's gRPC API is reached; empty means DCM_GRPC_ADDR
	// (the all-in-one program serves them all on one endpoint). Core's is
	// the gateway's alone: core tells the services under it what they need
	// (issue 31), so no other program takes the setting.
	CoreAddr        string `env:"DCM_CORE_ADDR" flag:"core-addr" programs:"gateway,dcm" usage:"where the core service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
	NamespaceAddr   string `env:"DCM_NAMESPACE_ADDR" flag:"namespace-addr" usage:"where the namespace service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
	UserAddr        string `env:"DCM_USER_ADDR" flag:"user-addr" usage:"where the user service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
	QuotaAddr       string `env:"DCM_QUOTA_ADDR" flag:"quota-addr" usage:"where the quota service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
	ServiceMeshAddr string `env:"DCM_SERVICEMESH_ADDR" flag:"servicemesh-addr" usage:"where the service-mesh service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
	CADistAddr      string `env:"DCM_CADIST_ADDR" flag:"cadist-addr" usage:"where the CA-distribution service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
	TrafficAddr     string `env:"DCM_TRAFFIC_ADDR" flag:"traffic-addr" usage:"where the traffic-controller service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
	RsyncAddr       string `env:"DCM_RSYNC_ADDR" flag:"rsync-addr" usage:"where the resource-synchronizer service's gRPC API is, or its replicas' as a comma-separated list (calls go round robin over every address and skip one that is down; empty: DCM_GRPC_ADDR)"`
}

// Peer returns addr, or the local gRPC address when addr is empty. A
// wildcard host (0.0.0.0, ::) is dialed on loopback.
func (c *Config) Peer(addr string) string {
	if addr == "" {
		addr = c.GRPCAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// IsLoopback reports whether addr ("host:port") listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
