package deploytest

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	// Every contract with a service: their descriptors register here, as
	// the gRPC server reads them (server.CallersOf).
	_ "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/core/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/keys/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/config"
	"github.com/dcm-project/dcm/platform/server"
)

// overlays are the installations deploy/ offers, with the replicas each
// runs of a program (production: core and the stateless services 2,
// rsync 3; docs/lifecycle.md and docs/rsync.md, "Replicas"; store-server:
// production's on a store server, core and rsync 2, the others 1).
var overlays = map[string]func(program string) int32{
	"dev": func(string) int32 { return 1 },
	"production": func(p string) int32 {
		if p == "rsync" {
			return 3
		}
		return 2
	},
	"store-server": func(p string) int32 {
		if p == "core" || p == "rsync" {
			return 2
		}
		return 1
	},
}

// sharedStore says whether an overlay's replicas share a store (every
// overlay but dev, whose programs each embed their own).
func sharedStore(overlay string) bool { return overlay != "dev" }

// repo is the repository's root, from this package's directory.
var repo = filepath.Join("..", "..")

// object is one object an overlay builds.
type object struct {
	Kind, Name, Namespace string
	YAML                  []byte
}

// build runs kustomize (its Go API, as kubectl apply -k does) on an
// overlay of deploy/overlays.
func build(t *testing.T, overlay string) []object {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(repo, "deploy", "overlays", overlay))
	require.NoError(t, err)
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	var out []object
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		require.NoError(t, err)
		out = append(out, object{Kind: r.GetKind(), Name: r.GetName(), Namespace: r.GetNamespace(), YAML: b})
	}
	return out
}

// decode reads an object strictly: a field its Go type lacks (a typo, a
// field at the wrong level) fails.
func decode(t *testing.T, o object, into any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(o.YAML, into), "%s %s", o.Kind, o.Name)
}

// programs are the per-service programs of the repository:
// services/<name>/cmd/<name>/main.go.
func programs(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join(repo, "services", "*", "cmd", "*", "main.go"))
	require.NoError(t, err)
	var out []string
	for _, m := range mains {
		cmd := filepath.Dir(m)
		if filepath.Base(cmd) == filepath.Base(filepath.Dir(filepath.Dir(cmd))) {
			out = append(out, filepath.Base(cmd))
		}
	}
	require.Contains(t, out, "gateway")
	require.Contains(t, out, "core")
	return out
}

// settings are the environment variables of server.Config, the one
// configuration of every program, and which of them are secrets.
func settings() (all, secret map[string]bool, defaults map[string]string) {
	all, secret, defaults = map[string]bool{}, map[string]bool{}, map[string]string{}
	ty := reflect.TypeFor[server.Config]()
	for i := range ty.NumField() {
		f := ty.Field(i)
		env := f.Tag.Get("env")
		if env == "" {
			continue
		}
		all[env] = true
		secret[env] = f.Tag.Get("secret") == "true"
		defaults[env] = f.Tag.Get("default")
	}
	return all, secret, defaults
}

// dialedAt is where the programs are told to find a service (key,
// DCM_<SVC>_ADDR): dcm-config's value, else the one the Deployments that
// set it themselves agree on (core's is the gateway's alone).
func dialedAt(config map[string]string, deployments map[string]appsv1.Deployment, key string) string {
	if v, ok := config[key]; ok {
		return v
	}
	var found []string
	for _, d := range deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == key && !slices.Contains(found, e.Value) {
					found = append(found, e.Value)
				}
			}
		}
	}
	if len(found) != 1 {
		return strings.Join(found, " and ")
	}
	return found[0]
}

// reads says whether program prog takes setting env (config.Reads): a
// setting of some programs only (DCM_CORE_ADDR, the gateway's) must not
// be given to another.
func reads(env, prog string) bool {
	for f := range reflect.TypeFor[server.Config]().Fields() {
		if f.Tag.Get("env") == env {
			return config.Reads(f, prog)
		}
	}
	return false
}

// grpcHosts says which programs serve a contract's package (dcm.<pkg>.v1):
// the service of that name, but for those hosted elsewhere.
func grpcHosts(t *testing.T, pkg string, progs []string) []string {
	switch pkg {
	case "facts": // the facts contract: platform/facts, served by the services under a logical cloud
		return []string{"namespace", "user", "quota", "traffic"}
	case "auth": // tokens: services/core/internal/core/tokens.go
		return []string{"core"}
	case "keys": // platform/app: every program with a store and services
		var out []string
		for _, p := range progs {
			if p != "gateway" {
				out = append(out, p)
			}
		}
		return out
	}
	require.Contains(t, progs, pkg, "contract package dcm.%s: which program serves it? (add it here)", pkg)
	return []string{pkg}
}

// callers are, per program, the programs the contracts let call any of
// its gRPC methods (server.CallersOf: docs/security.md, "Who may call
// what"); admins are not programs and call from outside.
func callers(t *testing.T, progs []string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		parts := strings.Split(string(f.Package()), ".")
		if parts[0] != "dcm" || f.Services().Len() == 0 {
			return true
		}
		for _, host := range grpcHosts(t, parts[1], progs) {
			for i := range f.Services().Len() {
				sd := f.Services().Get(i)
				for j := range sd.Methods().Len() {
					c, ok := server.CallersOf("/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name()))
					require.True(t, ok, "%s declares its callers", sd.FullName())
					if out[host] == nil {
						out[host] = map[string]bool{}
					}
					for _, p := range c.GetServices() {
						out[host][p] = true
					}
				}
			}
		}
		return true
	})
	return out
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	n, err := net.LookupPort("tcp", p)
	require.NoError(t, err, addr)
	return int32(n)
}

// monitoring is the label of the namespace whose pods (Prometheus) may
// reach each program's metrics port, as docs/deploy.md documents it.
var monitoring = map[string]string{"dcm.io/monitoring": "true"}

func matches(sel map[string]string, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

type certificate struct {
	Metadata struct{ Name string }
	Spec     struct {
		SecretName string `json:"secretName"`
		CommonName string `json:"commonName"`
		IsCA       bool   `json:"isCA"`
		Subject    struct {
			Organizations []string `json:"organizations"`
		} `json:"subject"`
		Usages    []string `json:"usages"`
		DNSNames  []string `json:"dnsNames"`
		IssuerRef struct {
			Name string `json:"name"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// TestOverlaysMatchTheCode builds each overlay and checks it against the
// programs: a Deployment, Service, ServiceAccount, PodDisruptionBudget and
// NetworkPolicy per program of services/*/cmd; every environment variable
// a setting of server.Config, no secret inline; the ports those of
// DCM_GRPC_ADDR, DCM_HTTP_ADDR and DCM_METRICS_ADDR (with Prometheus'
// scrape annotations naming the last); probes on /healthz over HTTPS; every
// file a setting names inside a mounted volume; the pods locked down
// (non-root, read-only root, no privilege escalation, no capabilities,
// RuntimeDefault seccomp; writes only to emptyDirs); gRPC open only to
// the callers the contracts name, the metrics port only to the monitoring
// namespace docs/deploy.md names; each certificate naming its program;
// every Secret not issued by cert-manager listed in docs/deploy.md.
func TestOverlaysMatchTheCode(t *testing.T) {
	t.Parallel()
	progs := programs(t)
	all, secret, defaults := settings()
	allowed := callers(t, progs)
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "deploy.md"))
	require.NoError(t, err)
	healthz, err := os.ReadFile(filepath.Join(repo, "platform", "server", "server.go"))
	require.NoError(t, err)
	require.Contains(t, string(healthz), `"GET /healthz"`, "the programs serve /healthz")
	for k, v := range monitoring {
		require.True(t, strings.Contains(string(doc), "`"+k+"="+v+"`"), "docs/deploy.md names the monitoring namespace's label %s=%s", k, v)
	}

	for overlay, replicas := range overlays {
		t.Run(overlay, func(t *testing.T) {
			t.Parallel()
			objs := build(t, overlay)
			deployments := map[string]appsv1.Deployment{}
			services := map[string]corev1.Service{}
			accounts := map[string]bool{}
			var budgets []policyv1.PodDisruptionBudget
			var policies []networkingv1.NetworkPolicy
			certs := map[string]certificate{} // by Secret
			config := map[string]string{}
			var namespaces []string
			for _, o := range objs {
				switch o.Kind {
				case "Namespace":
					namespaces = append(namespaces, o.Name)
				case "Deployment":
					var d appsv1.Deployment
					decode(t, o, &d)
					deployments[d.Name] = d
				case "Service":
					var s corev1.Service
					decode(t, o, &s)
					services[s.Name] = s
				case "ServiceAccount":
					var s corev1.ServiceAccount
					decode(t, o, &s)
					accounts[s.Name] = true
				case "PodDisruptionBudget":
					var p policyv1.PodDisruptionBudget
					decode(t, o, &p)
					budgets = append(budgets, p)
				case "NetworkPolicy":
					var p networkingv1.NetworkPolicy
					decode(t, o, &p)
					policies = append(policies, p)
				case "ConfigMap":
					var c corev1.ConfigMap
					decode(t, o, &c)
					require.Equal(t, "dcm-config", c.Name)
					config = c.Data
				case "Certificate":
					var c certificate // its schema is the CRD's: TestOverlaysApply
					require.NoError(t, yaml.Unmarshal(o.YAML, &c), o.Name)
					certs[c.Spec.SecretName] = c
				case "Issuer":
				default:
					t.Errorf("%s %s: a kind this test does not check", o.Kind, o.Name)
				}
			}
			require.Len(t, namespaces, 1)
			ns := namespaces[0]
			for _, o := range objs {
				if o.Kind != "Namespace" {
					// Every kind here is namespaced: one left out of the
					// overlay's namespace would go nowhere.
					require.Equal(t, ns, o.Namespace, "%s %s is in the Namespace %s", o.Kind, o.Name, ns)
				}
			}
			for k := range config {
				require.True(t, all[k], "dcm-config sets %s, which no program reads (server.Config)", k)
				require.False(t, secret[k], "%s is a secret: give it as a file", k)
			}
			get := func(env map[string]string, k string) string {
				if v, ok := env[k]; ok {
					return v
				}
				return defaults[k]
			}
			grpcPort, httpPort := port(t, get(config, "DCM_GRPC_ADDR")), port(t, get(config, "DCM_HTTP_ADDR"))

			// A default deny, then one policy per program.
			var denyAll bool
			for _, p := range policies {
				if len(p.Spec.PodSelector.MatchLabels) == 0 && len(p.Spec.PodSelector.MatchExpressions) == 0 {
					require.Empty(t, p.Spec.Ingress, "%s selects every pod: it must deny", p.Name)
					denyAll = denyAll || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
				}
			}
			require.True(t, denyAll, "a NetworkPolicy denies ingress to every pod no other one opens")

			issued := map[string]bool{}
			for s := range certs {
				issued[s] = true
			}
			require.Len(t, deployments, len(progs), "a Deployment per program, no other")
			for _, prog := range progs {
				name := "dcm-" + prog
				d, ok := deployments[name]
				require.True(t, ok, "a Deployment runs %s", prog)
				require.Equal(t, replicas(prog), *d.Spec.Replicas, "%s's replicas", name)
				pod := d.Spec.Template
				require.True(t, matches(d.Spec.Selector.MatchLabels, pod.Labels), "%s selects its pods", name)
				require.True(t, accounts[pod.Spec.ServiceAccountName], "%s runs as its own ServiceAccount", name)
				require.Equal(t, name, pod.Spec.ServiceAccountName)
				require.NotNil(t, pod.Spec.AutomountServiceAccountToken)
				require.False(t, *pod.Spec.AutomountServiceAccountToken, "%s never calls this cluster's API", name)

				psc := pod.Spec.SecurityContext
				require.NotNil(t, psc, name)
				require.True(t, psc.RunAsNonRoot != nil && *psc.RunAsNonRoot, name)
				require.NotNil(t, psc.RunAsUser, name)
				require.NotZero(t, *psc.RunAsUser, name)
				require.NotNil(t, psc.FSGroup, "%s: secret volumes readable by the program's group", name)
				require.NotNil(t, psc.SeccompProfile, name)
				require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type, name)

				volumes := map[string]corev1.Volume{}
				for _, v := range pod.Spec.Volumes {
					volumes[v.Name] = v
					if v.Secret != nil {
						require.True(t, issued[v.Secret.SecretName] || strings.Contains(string(doc), "`"+v.Secret.SecretName+"`"),
							"%s mounts Secret %s: cert-manager issues it or docs/deploy.md says to create it", name, v.Secret.SecretName)
						require.NotNil(t, v.Secret.DefaultMode)
						require.Zero(t, *v.Secret.DefaultMode&0o007, "%s: Secret %s is not world-readable", name, v.Secret.SecretName)
					}
				}
				require.Len(t, pod.Spec.Containers, 1, name)
				c := pod.Spec.Containers[0]
				require.Equal(t, []string{"/usr/local/bin/" + prog}, c.Command, "%s runs its program (the image of deploy/Dockerfile)", name)
				// The program's own image of make images (docs/images.md),
				// resolved on the node: nothing can pull dcm.local.
				require.Equal(t, "dcm.local/"+prog+":latest", c.Image, "%s runs the image make images builds for %s", name, prog)
				require.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy, "%s: dcm.local is no registry; :latest would default to Always", name)

				sc := c.SecurityContext
				require.NotNil(t, sc, name)
				require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: read-only root", name)
				require.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, name)
				require.True(t, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, name)
				require.NotNil(t, sc.Capabilities, name)
				require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, name)
				require.Empty(t, sc.Capabilities.Add, name)
				require.Nil(t, sc.Privileged, name)
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					require.Contains(t, c.Resources.Requests, r, "%s requests %s", name, r)
					require.Contains(t, c.Resources.Limits, r, "%s is limited in %s", name, r)
				}

				// Its environment: dcm-config and its own settings.
				env := map[string]string{}
				for _, ef := range c.EnvFrom {
					require.NotNil(t, ef.ConfigMapRef, name)
					require.Equal(t, "dcm-config", ef.ConfigMapRef.Name, name)
					for k, v := range config {
						env[k] = v
					}
				}
				for _, e := range c.Env {
					require.True(t, all[e.Name], "%s sets %s, which no program reads (server.Config)", name, e.Name)
					require.False(t, secret[e.Name], "%s: %s is a secret: give it as a file", name, e.Name)
					require.Nil(t, e.ValueFrom, "%s: %s: settings are values; secrets are files", name, e.Name)
					env[e.Name] = e.Value
				}
				for k := range env {
					require.True(t, reads(k, prog), "%s gets %s, which the %s program does not take (server.Config's programs tag)", name, k, prog)
				}
				mounts := map[string]corev1.VolumeMount{}
				for _, m := range c.VolumeMounts {
					require.Contains(t, volumes, m.Name, name)
					mounts[m.MountPath] = m
				}
				mountOf := func(path string) (corev1.VolumeMount, bool) {
					for dir, m := range mounts {
						if strings.HasPrefix(path, dir+"/") {
							return m, true
						}
					}
					return corev1.VolumeMount{}, false
				}
				for k, v := range env {
					store := k == "DCM_MONGO_URI_FILE" || k == "DCM_KEK_FILE"
					if !strings.HasSuffix(k, "_FILE") || v == "" || (store && prog == "gateway") {
						continue // the gateway has no store (app.Main(..., false, ...))
					}
					m, ok := mountOf(v)
					require.True(t, ok, "%s: %s=%s is in no mounted volume", name, k, v)
					require.NotNil(t, volumes[m.Name].Secret, "%s: %s comes from a Secret", name, k)
					require.True(t, m.ReadOnly, "%s: %s read-only", name, k)
				}
				for _, k := range []string{"DCM_TLS_CA_FILE", "DCM_TLS_CERT_FILE", "DCM_TLS_KEY_FILE"} {
					require.NotEmpty(t, env[k], "%s: %s (mutual TLS)", name, k)
				}
				tlsVol := volumes[mounts[filepath.Dir(env["DCM_TLS_CERT_FILE"])].Name]
				require.NotNil(t, tlsVol.Secret, name)
				cert, ok := certs[tlsVol.Secret.SecretName]
				require.True(t, ok, "%s's certificate is issued by cert-manager", name)
				require.Equal(t, prog, cert.Spec.CommonName, "%s's certificate names it (the allow-lists' identity)", name)
				require.Equal(t, []string{"service"}, cert.Spec.Subject.Organizations, name)
				require.Subset(t, cert.Spec.Usages, []string{"server auth", "client auth"}, name)
				require.Contains(t, cert.Spec.DNSNames, name+"."+ns+".svc", "%s's certificate names its Service", name)
				require.Contains(t, cert.Spec.DNSNames, name, "%s's certificate names its Service as its peers dial it", name)
				if prog != "gateway" {
					require.Equal(t, "/etc/dcm/tls", filepath.Dir(env["DCM_TLS_CERT_FILE"]))
				}
				// It writes only to emptyDirs: its data directory and /tmp.
				for dir, m := range mounts {
					if !m.ReadOnly {
						require.NotNil(t, volumes[m.Name].EmptyDir, "%s writes to %s: an emptyDir", name, dir)
					}
				}
				dataDir, ok := mounts[get(env, "DCM_DATA_DIR")]
				require.True(t, ok, "%s: DCM_DATA_DIR %s is a mounted emptyDir", name, get(env, "DCM_DATA_DIR"))
				require.False(t, dataDir.ReadOnly)
				require.Contains(t, mounts, "/tmp", name)
				if sharedStore(overlay) && prog != "gateway" {
					// The replicas share a MongoDB: its URI, with this
					// service's own user, from a Secret; its own keys.
					m, ok := mountOf(env["DCM_MONGO_URI_FILE"])
					require.True(t, ok, "%s: DCM_MONGO_URI_FILE", name)
					require.Equal(t, "dcm-mongo-"+prog, volumes[m.Name].Secret.SecretName, "%s has its own database user", name)
					m, ok = mountOf(env["DCM_KEK_FILE"])
					require.True(t, ok, "%s: DCM_KEK_FILE", name)
					require.Equal(t, "dcm-kek-"+prog, volumes[m.Name].Secret.SecretName, "%s holds its own keys only", name)
				}
				if prog == "gateway" {
					https, ok := mountOf(env["DCM_HTTP_TLS_CERT_FILE"])
					require.True(t, ok, "the gateway serves HTTPS with a certificate of its own")
					c := certs[volumes[https.Name].Secret.SecretName]
					require.NotEmpty(t, c.Spec.Usages)
					require.NotContains(t, c.Spec.Usages, "client auth", "whoever holds the HTTPS key holds no DCM identity")
					require.Empty(t, c.Spec.Subject.Organizations)
					require.Contains(t, c.Spec.DNSNames, name+"."+ns+".svc", "the HTTPS certificate names the gateway's Service")
					require.NotEmpty(t, env["DCM_ADMIN_TOKEN_FILE"])
				}

				// Ports: the program's, named; probes on /healthz over HTTPS.
				ports := map[string]int32{}
				for _, p := range c.Ports {
					ports[p.Name] = p.ContainerPort
				}
				require.Equal(t, httpPort, ports["https"], "%s: https is DCM_HTTP_ADDR's port", name)
				// The scrape listener: set, on every interface, the port
				// named metrics, and the annotations a Prometheus
				// kubernetes_sd (role pod) configuration reads.
				metricsAddr := get(env, "DCM_METRICS_ADDR")
				require.NotEmpty(t, metricsAddr, "%s: DCM_METRICS_ADDR (Prometheus scrapes the metrics listener)", name)
				metricsHost, _, err := net.SplitHostPort(metricsAddr)
				require.NoError(t, err, name)
				require.Equal(t, "0.0.0.0", metricsHost, "%s: the metrics listener is reachable from other pods", name)
				metricsPort := port(t, metricsAddr)
				require.Equal(t, metricsPort, ports["metrics"], "%s: metrics is DCM_METRICS_ADDR's port", name)
				require.Equal(t, map[string]string{
					"prometheus.io/scrape": "true",
					"prometheus.io/port":   strconv.Itoa(int(metricsPort)),
					"prometheus.io/path":   "/metrics",
					"prometheus.io/scheme": "http",
				}, pod.Annotations, "%s: Prometheus' scrape annotations on its pods", name)
				serves := len(allowed[prog]) > 0
				if serves {
					require.Equal(t, grpcPort, ports["grpc"], "%s: grpc is DCM_GRPC_ADDR's port", name)
					addr := dialedAt(config, deployments, "DCM_"+strings.ToUpper(prog)+"_ADDR")
					host, _, err := net.SplitHostPort(addr)
					require.NoError(t, err, "the programs find %s at DCM_%s_ADDR", prog, strings.ToUpper(prog))
					require.Equal(t, name, host, "the programs find %s at its Service", prog)
					require.Equal(t, grpcPort, port(t, addr), "the programs dial %s's gRPC port", prog)
				} else {
					require.NotContains(t, ports, "grpc", "%s serves no gRPC", name)
				}
				require.Len(t, ports, len(c.Ports), name)
				for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					require.NotNil(t, probe, name)
					require.NotNil(t, probe.HTTPGet, name)
					require.Equal(t, "/healthz", probe.HTTPGet.Path, name)
					require.Equal(t, corev1.URISchemeHTTPS, probe.HTTPGet.Scheme, name)
					require.Equal(t, "https", probe.HTTPGet.Port.String(), name)
				}

				// A stopping pod keeps serving a while out of its Service's
				// endpoints and DNS, so that its clients find the new
				// replicas first (TestStoreServerOverlayRollingRestarts
				// failed calls without it), and has time left to stop.
				require.NotNil(t, c.Lifecycle, "%s: a preStop pause", name)
				require.NotNil(t, c.Lifecycle.PreStop, "%s: a preStop pause", name)
				require.NotNil(t, c.Lifecycle.PreStop.Sleep, "%s: a preStop sleep (no shell in the image)", name)
				grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
				if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
					grace = *g
				}
				require.Positive(t, c.Lifecycle.PreStop.Sleep.Seconds, name)
				require.Less(t, 2*c.Lifecycle.PreStop.Sleep.Seconds, grace, "%s: the pause leaves the program time to stop", name)

				// Its Service: the program's ports, by name.
				svc, ok := services[name]
				require.True(t, ok, "a Service for %s", name)
				require.Equal(t, pod.Labels["app.kubernetes.io/name"], svc.Spec.Selector["app.kubernetes.io/name"])
				require.True(t, matches(svc.Spec.Selector, pod.Labels), "Service %s selects its pods", name)
				svcMetrics := false
				for _, sp := range svc.Spec.Ports {
					require.Contains(t, ports, sp.TargetPort.String(), "Service %s port %s targets a port of the program", name, sp.Name)
					if sp.Name == "grpc" {
						require.Equal(t, grpcPort, sp.Port, "the programs dial %s at DCM_%s_ADDR", name, strings.ToUpper(prog))
					}
					svcMetrics = svcMetrics || (sp.Name == "metrics" && sp.TargetPort.String() == "metrics")
				}
				require.True(t, svcMetrics, "Service %s has the metrics port (endpoint discovery, a ServiceMonitor)", name)

				// One budget selects its pods (and no other's), and lets a
				// drain go on (one replica down at a time).
				var selecting []policyv1.PodDisruptionBudget
				for _, b := range budgets {
					if matches(b.Spec.Selector.MatchLabels, pod.Labels) {
						selecting = append(selecting, b)
					}
				}
				require.Len(t, selecting, 1, "one PodDisruptionBudget selects %s's pods", name)
				b := selecting[0]
				require.NotNil(t, b.Spec.MaxUnavailable, "%s: maxUnavailable, so one replica never blocks a drain", b.Name)
				require.Equal(t, int32(1), b.Spec.MaxUnavailable.IntVal)

				// Its NetworkPolicy: gRPC from exactly the programs the
				// contracts let call it; HTTPS from anywhere.
				var own []networkingv1.NetworkPolicy
				for _, p := range policies {
					if matches(p.Spec.PodSelector.MatchLabels, pod.Labels) {
						own = append(own, p)
					}
				}
				require.Len(t, own, 1, "one NetworkPolicy selects %s's pods", name)
				require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, own[0].Spec.PolicyTypes)
				grpcFrom := map[string]bool{}
				httpsOpen, metricsOpen := false, false
				for _, rule := range own[0].Spec.Ingress {
					require.NotEmpty(t, rule.Ports, "%s: every rule names its port", own[0].Name)
					for _, p := range rule.Ports {
						require.NotNil(t, p.Port)
						require.Contains(t, ports, p.Port.String(), "%s opens a port of the program", own[0].Name)
						switch p.Port.String() {
						case "metrics":
							// The monitoring namespace, and only to this port.
							require.Len(t, rule.Ports, 1, "%s: the metrics rule opens the metrics port alone", own[0].Name)
							require.NotEmpty(t, rule.From, "%s: the metrics port is never open to all", own[0].Name)
							for _, from := range rule.From {
								require.Nil(t, from.IPBlock, own[0].Name)
								require.Nil(t, from.PodSelector, "%s: any pod of the monitoring namespace", own[0].Name)
								require.NotNil(t, from.NamespaceSelector, own[0].Name)
								require.Empty(t, from.NamespaceSelector.MatchExpressions, own[0].Name)
								require.Equal(t, monitoring, from.NamespaceSelector.MatchLabels, "%s: the documented monitoring namespace", own[0].Name)
							}
							metricsOpen = true
						case "grpc":
							require.NotEmpty(t, rule.From, "%s: gRPC is never open to all", own[0].Name)
							for _, from := range rule.From {
								require.Nil(t, from.NamespaceSelector, "%s: callers in the namespace only", own[0].Name)
								require.Nil(t, from.IPBlock)
								require.NotNil(t, from.PodSelector)
								caller := strings.TrimPrefix(from.PodSelector.MatchLabels["app.kubernetes.io/name"], "dcm-")
								require.Contains(t, progs, caller)
								require.Len(t, from.PodSelector.MatchLabels, 1)
								grpcFrom[caller] = true
							}
						case "https":
							httpsOpen = len(rule.From) == 0
						}
					}
				}
				want := allowed[prog]
				if want == nil {
					want = map[string]bool{}
				}
				require.Equal(t, want, grpcFrom, "%s: gRPC from exactly the callers of docs/security.md's table", name)
				require.True(t, httpsOpen, "%s: HTTPS (/healthz, /metrics, REST) open", name)
				require.True(t, metricsOpen, "%s: the metrics port open to the monitoring namespace", name)
			}
			require.Len(t, budgets, len(progs), "a budget per program, none for nothing")
			require.Len(t, policies, len(progs)+1, "a NetworkPolicy per program and the default deny")
			require.Len(t, services, len(progs))
			require.Len(t, accounts, len(progs))

			// Every Certificate is mounted by a program, or is the dev CA.
			var mounted []string
			for _, d := range deployments {
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Secret != nil {
						mounted = append(mounted, v.Secret.SecretName)
					}
				}
			}
			for s, c := range certs {
				require.True(t, c.Spec.IsCA || slices.Contains(mounted, s), "Certificate %s is used", c.Metadata.Name)
			}
		})
	}
}

// secretName matches the Secrets docs/deploy.md tells to create.
var secretName = regexp.MustCompile("kubectl -n dcm create secret [a-z]+ ([a-z0-9$-]+)")

// TestDocumentedSecretsAreUsed: every Secret docs/deploy.md says to create
// is one an overlay mounts or issues from (no stale instruction).
func TestDocumentedSecretsAreUsed(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "deploy.md"))
	require.NoError(t, err)
	used := map[string]bool{}
	for overlay := range overlays {
		for _, o := range build(t, overlay) {
			used[o.Name] = true // dcm-ca: the Issuer's Secret has its name
			for _, m := range regexp.MustCompile(`secretName: ([a-z0-9-]+)`).FindAllSubmatch(o.YAML, -1) {
				used[string(m[1])] = true
			}
		}
	}
	found := secretName.FindAllSubmatch(doc, -1)
	require.NotEmpty(t, found)
	for _, m := range found {
		name := strings.ReplaceAll(string(m[1]), "$s", "core")
		require.True(t, used[name], "docs/deploy.md creates Secret %s, which no overlay uses", m[1])
	}
}
