package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/dcm-project/dcm/platform/kube"
)

// The renderer never trusts a chart with text it did not check (issue 29):
// Istio's templates print some values unquoted, so a value with a newline
// or a quote would write fields of its own into the manifest. Three
// fences:
//   - checkInput: every input that reaches a value or a name has its type
//     (DNS label, IP address from netip without zone, image hub and tag);
//   - checkValues: every string leaf of the values map handed to a chart
//     is at a path this renderer sets, and matches that path's type;
//   - parseChartDoc and checkChartObject: each rendered document is one
//     object, without duplicate keys or trailing content, of a kind and
//     name the chart is expected to render, with its sensitive fields
//     (Services' externalIPs and loadBalancerIP, pod host access, images,
//     webhook targets and selectors, binding subjects) as DCM set them.

var (
	hubRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)
	tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	// sharedKeyRE is SharedIPKey's form.
	sharedKeyRE = regexp.MustCompile(`^dcm/[a-z0-9]([a-z0-9-]*[a-z0-9])?/[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	// keyRE is what a map key of the values may be (label keys, cluster
	// IDs, env names).
	keyRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_./-]*[A-Za-z0-9])?$`)
	// quantityRE is the resource figures DCM sets (tuneReleases).
	quantityRE = regexp.MustCompile(`^[0-9]{1,6}(m|Mi|Gi)?$`)
)

func isLabel(s string) bool     { return len(validation.IsDNS1123Label(s)) == 0 }
func isSubdomain(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }

// checkInput refuses an input whose text is not of its type.
func checkInput(in Input) error {
	for _, f := range []struct{ what, v string }{
		{"project", in.Project}, {"logical cloud", in.LogicalCloud}, {"revision", in.Revision}, {"istio namespace", in.IstioNamespace},
	} {
		if !isLabel(f.v) {
			return fmt.Errorf("%s %q is not a DNS label", f.what, f.v)
		}
	}
	if !isSubdomain(in.TrustDomain) {
		return fmt.Errorf("trust domain %q is not a DNS name", in.TrustDomain)
	}
	if !hubRE.MatchString(in.Hub) {
		return fmt.Errorf("image hub %q is not a registry path", in.Hub)
	}
	if !tagRE.MatchString(in.Tag) {
		return fmt.Errorf("image tag %q is not an image tag", in.Tag)
	}
	for _, c := range in.Clusters {
		if !isLabel(c.Provider) || !isLabel(c.Cluster) {
			return fmt.Errorf("cluster %q/%q: provider and cluster are DNS labels", c.Provider, c.Cluster)
		}
		if c.LoadBalancerIP != "" {
			if _, err := kube.CheckIP(c.LoadBalancerIP); err != nil {
				return fmt.Errorf("cluster %s/%s: loadbalancer-ip %w", c.Provider, c.Cluster, err)
			}
		}
	}
	return nil
}

// valueType checks one string value.
type valueType func(string) bool

func literal(vs ...string) valueType { return func(s string) bool { return slices.Contains(vs, s) } }

var (
	labelValue valueType = func(s string) bool { return len(validation.IsValidLabelValue(s)) == 0 }
	dnsLabel   valueType = isLabel
	dnsName    valueType = isSubdomain
	ipAddress  valueType = func(s string) bool { _, err := kube.CheckIP(s); return err == nil }
	imageHub   valueType = hubRE.MatchString
	imageTag   valueType = tagRE.MatchString
	sharedKey  valueType = sharedKeyRE.MatchString
	// quantity is a resource figure of quota.go's constants (CPU in
	// millicores, memory in Mi).
	quantity valueType = quantityRE.MatchString
)

// valueTypes are the string values DCM hands each chart, by path: map
// keys are "*", list items "#" (path.Match patterns over "/"-joined
// paths). A string leaf at no listed path is refused.
var valueTypes = map[string]map[string]valueType{
	baseChart: {
		"defaultRevision":       literal(""),
		"global/istioNamespace": dnsLabel,
		"global/resourceScope":  literal("namespace", "cluster"),
	},
	discoveryChart: {
		"revision":                        dnsLabel,
		"global/istioNamespace":           dnsLabel,
		"global/hub":                      imageHub,
		"global/tag":                      imageTag,
		"global/meshID":                   dnsName,
		"global/multiCluster/clusterName": dnsLabel,
		"global/network":                  dnsLabel,
		"global/meshNetworks/*/endpoints/#/fromRegistry": dnsLabel,
		"global/meshNetworks/*/gateways/#/address":       ipAddress,
		"meshConfig/trustDomain":                         dnsName,
		"meshConfig/discoverySelectors/#/matchLabels/*":  labelValue,
		"meshConfig/defaultConfig/proxyMetadata/*":       literal("true", "false"),
		"base/validationFailurePolicy":                   literal("Fail"),
		"env/*":                                          literal("true", "false"),
		// tuneReleases (rbac.go): Ingress support off, the autoscaler
		// capped, istiod's figures inside the mesh's quota (quota.go).
		"meshConfig/ingressControllerMode": literal("OFF"),
		"resources/*/cpu":                  quantity,
		"resources/*/memory":               quantity,
	},
	gatewayChart: {
		"name":                     dnsLabel,
		"revision":                 dnsLabel,
		"networkGateway":           dnsLabel,
		"labels/*":                 labelValue,
		"serviceAccount/name":      dnsLabel,
		"service/type":             literal("LoadBalancer", "ClusterIP"),
		"service/loadBalancerIP":   ipAddress,
		"service/annotations/*":    sharedKey,
		"service/ports/#/name":     dnsLabel,
		"service/ports/#/protocol": literal("TCP"),
		"global/hub":               imageHub,
		"global/tag":               imageTag,
		"global/network":           dnsLabel,
		"resources/*/cpu":          quantity,
		"resources/*/memory":       quantity,
	},
}

// checkValues refuses values for chart with a string leaf at a path DCM
// does not set, or not of its path's type, or a map key that is not a
// plain key. Numbers and booleans pass; anything else (nil, other Go
// types) is refused.
func checkValues(chart string, vals map[string]any) error {
	types, ok := valueTypes[chart]
	if !ok {
		return fmt.Errorf("no value types for chart %s", chart)
	}
	var walk func(p []string, v any) error
	walk = func(p []string, v any) error {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !keyRE.MatchString(k) || len(k) > 253 {
					return fmt.Errorf("values of %s: key %q at %q", path.Base(chart), k, strings.Join(p, "/"))
				}
				if err := walk(append(slices.Clip(p), k), e); err != nil {
					return err
				}
			}
		case map[string]string:
			m := make(map[string]any, len(v))
			for k, e := range v {
				m[k] = e
			}
			return walk(p, m)
		case []any:
			for _, e := range v {
				if err := walk(append(slices.Clip(p), "#"), e); err != nil {
					return err
				}
			}
		case string:
			t := typeAt(types, p)
			if t == nil {
				return fmt.Errorf("values of %s: %q is not a value DCM sets", path.Base(chart), strings.Join(p, "/"))
			}
			if !t(v) {
				return fmt.Errorf("values of %s: %s = %q is not of its type", path.Base(chart), strings.Join(p, "/"), v)
			}
		case bool, int, int32, int64, float64, json.Number:
		default:
			return fmt.Errorf("values of %s: %s is a %T", path.Base(chart), strings.Join(p, "/"), v)
		}
		return nil
	}
	return walk(nil, vals)
}

// typeAt is the type of the value at path p (its keys and "#" for list
// items): the first pattern whose "/"-separated segments match p's, "*"
// standing for any one key.
func typeAt(types map[string]valueType, p []string) valueType {
	for pat, t := range types {
		segs := strings.Split(pat, "/")
		if len(segs) != len(p) {
			continue
		}
		match := true
		for i, s := range segs {
			if s != p[i] && (s != "*" || p[i] == "#") {
				match = false
				break
			}
		}
		if match {
			return t
		}
	}
	return nil
}

// parseChartDoc reads one rendered document strictly: one YAML document
// (no second one behind it, whatever its separator), a mapping without
// duplicate keys, a Kubernetes object (parseObject's checks).
func parseChartDoc(doc string) (object, error) {
	d := yamlv3.NewDecoder(strings.NewReader(doc))
	n := 0
	for {
		var node yamlv3.Node
		err := d.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not YAML: %w: %s", err, firstLine(doc))
		}
		n++
		if n == 1 && (len(node.Content) != 1 || node.Content[0].Kind != yamlv3.MappingNode) {
			return nil, errors.New("a document that is not one object: " + firstLine(doc))
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%d YAML documents where one object was rendered: %s", n, firstLine(doc))
	}
	j, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, firstLine(doc))
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var o object
	if err := dec.Decode(&o); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing content after the object: " + firstLine(doc))
	}
	if o.str("apiVersion") == "" || o.str("kind") == "" || o.name() == "" {
		return nil, errors.New("not a Kubernetes object (apiVersion, kind, metadata.name): " + firstLine(doc))
	}
	return o, nil
}

// chartKinds are the kinds each chart may render; cluster-scoped ones are
// marked true.
var chartKinds = map[string]map[string]bool{
	baseChart: {"ServiceAccount": false},
	discoveryChart: {
		"ConfigMap": false, "Deployment": false, "HorizontalPodAutoscaler": false, "PodDisruptionBudget": false,
		"Role": false, "RoleBinding": false, "Service": false, "ServiceAccount": false,
		"ClusterRole": true, "ClusterRoleBinding": true,
		"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	},
	gatewayChart: {
		"Deployment": false, "HorizontalPodAutoscaler": false, "PodDisruptionBudget": false,
		"Role": false, "RoleBinding": false, "Service": false, "ServiceAccount": false,
	},
}

// chartAPIVersions are the API versions of each kind.
var chartAPIVersions = map[string][]string{
	"ConfigMap": {"v1"}, "Service": {"v1"}, "ServiceAccount": {"v1"},
	"Deployment": {"apps/v1"}, "HorizontalPodAutoscaler": {"autoscaling/v2"}, "PodDisruptionBudget": {"policy/v1"},
	"Role": {"rbac.authorization.k8s.io/v1"}, "RoleBinding": {"rbac.authorization.k8s.io/v1"},
	"ClusterRole": {"rbac.authorization.k8s.io/v1"}, "ClusterRoleBinding": {"rbac.authorization.k8s.io/v1"},
	"MutatingWebhookConfiguration":   {"admissionregistration.k8s.io/v1"},
	"ValidatingWebhookConfiguration": {"admissionregistration.k8s.io/v1"},
}

// checkChartObject refuses an object release r of chart should not have
// rendered for cluster c: an unexpected kind or API version, a namespace
// other than the istio namespace, a name outside the release's, the
// cluster-wide default validator, a webhook with a caBundle (istiod patches
// its own; applying one would fight it), another target than istiod or a
// namespace selector without DCM's labels, a Service with externalIPs, an
// externalName or a loadBalancerIP other than the cluster reference's, a
// pod with host access, hostPath volumes, privileged containers or images
// from elsewhere, and bindings of subjects outside the istio namespace.
func checkChartObject(in Input, c Cluster, r release, o object) error {
	kind, name, ns := o.str("kind"), o.name(), o.namespace()
	what := fmt.Sprintf("%s: %s %s", path.Base(r.dir), kind, name)
	clusterScoped, ok := chartKinds[r.dir][kind]
	if !ok {
		return fmt.Errorf("%s: a kind this chart is not expected to render", what)
	}
	if !slices.Contains(chartAPIVersions[kind], o.str("apiVersion")) {
		return fmt.Errorf("%s: apiVersion %q", what, o.str("apiVersion"))
	}
	if name == "istiod-default-validator" {
		return errors.New("the chart rendered istiod-default-validator")
	}
	if clusterScoped {
		if ns != "" {
			return fmt.Errorf("%s: cluster-scoped, with a namespace %q", what, ns)
		}
	} else if ns != in.IstioNamespace {
		return fmt.Errorf("%s: namespace %q, not the istio namespace %q", what, ns, in.IstioNamespace)
	}
	if !isSubdomain(name) {
		return fmt.Errorf("%s: not a DNS name", what)
	}
	switch {
	case r.dir == baseChart:
		if name != "istio-reader-service-account" {
			return fmt.Errorf("%s: not istio-reader-service-account", what)
		}
	case r.dir == gatewayChart:
		if name != r.name {
			return fmt.Errorf("%s: not named after its release %s", what, r.name)
		}
	case clusterScoped:
		if !strings.HasSuffix(name, "-"+in.Revision+"-"+in.IstioNamespace) {
			return fmt.Errorf("%s: a cluster-scoped name without the revision and istio namespace", what)
		}
	default:
		if !strings.HasSuffix(name, "-"+in.Revision) {
			return fmt.Errorf("%s: a name without the revision", what)
		}
	}
	switch kind {
	case "Service":
		return checkService(c, what, o)
	case "Deployment":
		return checkPods(in, what, o)
	case "RoleBinding", "ClusterRoleBinding":
		subjects, _ := o["subjects"].([]any)
		for _, s := range subjects {
			sub, _ := s.(map[string]any)
			ns, set := sub["namespace"]
			if !set && kind == "RoleBinding" {
				ns = in.IstioNamespace // a RoleBinding's own namespace
			}
			if sub["kind"] != "ServiceAccount" || ns != in.IstioNamespace {
				return fmt.Errorf("%s: binds %v, not a ServiceAccount of the istio namespace", what, s)
			}
		}
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		return checkWebhooks(in, what, o)
	}
	return nil
}

func checkService(c Cluster, what string, o object) error {
	spec, _ := o["spec"].(map[string]any)
	for _, f := range []string{"externalIPs", "externalName", "loadBalancerSourceRanges", "clusterIP", "clusterIPs"} {
		if _, ok := spec[f]; ok {
			return fmt.Errorf("%s: spec.%s is never rendered", what, f)
		}
	}
	if t, ok := spec["type"]; ok && t != "ClusterIP" && t != "LoadBalancer" {
		return fmt.Errorf("%s: type %v", what, t)
	}
	if ip, ok := spec["loadBalancerIP"]; ok && (c.LoadBalancerIP == "" || ip != c.LoadBalancerIP) {
		return fmt.Errorf("%s: loadBalancerIP %v is not the cluster reference's (%q)", what, ip, c.LoadBalancerIP)
	}
	return nil
}

// podVolumes are the volume sources a chart's pods may use.
var podVolumes = []string{"emptyDir", "projected", "secret", "configMap"}

func checkPods(in Input, what string, o object) error {
	spec, _ := o["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	if pod == nil {
		return fmt.Errorf("%s: no pod template", what)
	}
	for _, f := range []string{"hostNetwork", "hostPID", "hostIPC", "hostUsers", "nodeName"} {
		if _, ok := pod[f]; ok {
			return fmt.Errorf("%s: pod sets %s", what, f)
		}
	}
	vols, _ := pod["volumes"].([]any)
	for _, v := range vols {
		vol, _ := v.(map[string]any)
		for k := range vol {
			if k != "name" && !slices.Contains(podVolumes, k) {
				return fmt.Errorf("%s: a %s volume", what, k)
			}
		}
	}
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := pod[list].([]any)
		for _, ci := range cs {
			ctr, _ := ci.(map[string]any)
			img, _ := ctr["image"].(string)
			// "auto": the injector sets the proxy image.
			if img != "auto" && !strings.HasPrefix(img, in.Hub+"/") {
				return fmt.Errorf("%s: image %q is not from %s", what, img, in.Hub)
			}
			if img != "auto" && !strings.HasSuffix(img, ":"+in.Tag) {
				return fmt.Errorf("%s: image %q is not of tag %s", what, img, in.Tag)
			}
			sc, _ := ctr["securityContext"].(map[string]any)
			if sc["privileged"] == true {
				return fmt.Errorf("%s: privileged container", what)
			}
		}
	}
	return nil
}

// checkWebhooks: every webhook calls this logical cloud's istiod, carries
// no caBundle and selects namespaces by DCM's labels of the logical cloud.
func checkWebhooks(in Input, what string, o object) error {
	hooks, _ := o["webhooks"].([]any)
	for _, h := range hooks {
		hook, _ := h.(map[string]any)
		cc, _ := hook["clientConfig"].(map[string]any)
		if _, ok := cc["caBundle"]; ok {
			return fmt.Errorf("%s sets a caBundle", what)
		}
		if _, ok := cc["url"]; ok {
			return fmt.Errorf("%s: a webhook with a URL", what)
		}
		svc, _ := cc["service"].(map[string]any)
		if svc["name"] != "istiod-"+in.Revision || svc["namespace"] != in.IstioNamespace {
			return fmt.Errorf("%s: a webhook calls %v, not istiod-%s in %s", what, svc, in.Revision, in.IstioNamespace)
		}
		sel, _ := hook["namespaceSelector"].(map[string]any)
		ml, _ := sel["matchLabels"].(map[string]any)
		for k, v := range kube.Labels(in.Project, in.LogicalCloud) {
			if ml[k] != v {
				return fmt.Errorf("%s: webhook %v does not select the logical cloud's namespaces (%s=%s)", what, hook["name"], k, v)
			}
		}
	}
	return nil
}
