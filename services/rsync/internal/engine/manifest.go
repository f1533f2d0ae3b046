package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/dcm-project/dcm/platform/errs"
)

// object is a parsed manifest.
type object struct {
	u    *unstructured.Unstructured
	key  string // identity: group, kind, namespace, name
	hash string
	// sensitive objects (sealed.go) keep their manifest's text, in memory
	// only, to be sealed in the rollout record.
	sensitive bool
	text      string
}

// keyOf is a resource's identity. The version is left out: the same object
// served at another version is the same object.
func keyOf(apiVersion, kind, namespace, name string) string {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.Group + "/" + kind + "/" + namespace + "/" + name
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// parseManifest reads one object from JSON or YAML; field names the
// manifest in errors.
func parseManifest(field, text string) (*object, error) {
	docs := 0
	for _, d := range docSeparator.Split(text, -1) {
		if strings.TrimSpace(d) != "" {
			docs++
		}
	}
	if docs > 1 {
		return nil, errs.Invalid(field, "holds %d YAML documents: give one object per manifest", docs)
	}
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, errs.Invalid(field, "is neither JSON nor YAML: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, errs.Invalid(field, "is not a Kubernetes object: %v", err)
	}
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	if err != nil || gv.Version == "" {
		return nil, errs.Invalid(field, "has a bad apiVersion %q", u.GetAPIVersion())
	}
	if u.GetName() == "" {
		return nil, errs.Invalid(field, "has no metadata.name")
	}
	if ns := u.GetNamespace(); ns != "" {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return nil, errs.Invalid(field, "metadata.namespace %q: %s", ns, strings.Join(msgs, "; "))
		}
	}
	for _, f := range []string{"resourceVersion", "uid", "managedFields", "deletionTimestamp"} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", f); ok {
			return nil, errs.Invalid(field, "sets metadata.%s, which the cluster owns", f)
		}
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	sum := sha256.Sum256([]byte(text))
	return &object{
		u:    u,
		key:  keyOf(u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName()),
		hash: "sha256:" + hex.EncodeToString(sum[:]),
	}, nil
}

// rank puts the kinds others depend on first: Namespaces and
// CustomResourceDefinitions.
func rank(o *object) int {
	gvk := o.u.GroupVersionKind()
	switch {
	case gvk.Group == "" && gvk.Kind == "Namespace":
		return 0
	case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return 0
	default:
		return 1
	}
}

// applyOrder sorts objs stably by rank.
func applyOrder(objs []*object) []*object {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *object) int { return rank(a) - rank(b) })
	return out
}

// isCSR says whether o is a CertificateSigningRequest, which rsync approves
// and waits on.
func isCSR(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "certificates.k8s.io" && gvk.Kind == "CertificateSigningRequest"
}

func describe(apiVersion, kind, namespace, name string) string {
	if namespace == "" {
		return fmt.Sprintf("%s %s (%s)", kind, name, apiVersion)
	}
	return fmt.Sprintf("%s %s/%s (%s)", kind, namespace, name, apiVersion)
}
