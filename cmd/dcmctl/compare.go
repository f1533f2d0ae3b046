package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// change is one difference between what a file says and what the server
// holds.
type change struct {
	Path   string
	Actual any
	Wanted any
}

func (c change) String() string {
	return fmt.Sprintf("%s: %s -> %s", c.Path, compact(c.Actual), compact(c.Wanted))
}

func compact(v any) string {
	if v == nil {
		return "(none)"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// changes lists where wanted differs from actual. Only what wanted says is
// compared: the server's defaults and read-only fields (status, a
// permission's namespace) are not changes. Scalars compare as the gateway
// reads them: "80" equals 80 and "true" equals true; an empty value
// equals an absent one.
func changes(path string, wanted, actual any) []change {
	switch w := wanted.(type) {
	case map[string]any:
		a, _ := actual.(map[string]any)
		if a == nil && len(w) > 0 && !isZero(actual) {
			return []change{{path, actual, wanted}}
		}
		var out []change
		for _, k := range sortedKeys(w) {
			out = append(out, changes(join(path, k), w[k], a[k])...)
		}
		return out
	case []any:
		a, _ := actual.([]any)
		if len(a) != len(w) {
			return []change{{path, actual, wanted}}
		}
		var out []change
		for i := range w {
			out = append(out, changes(fmt.Sprintf("%s[%d]", path, i), w[i], a[i])...)
		}
		return out
	default:
		if scalarEqual(wanted, actual) {
			return nil
		}
		return []change{{path, actual, wanted}}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func scalarEqual(w, a any) bool {
	if isZero(w) && isZero(a) {
		return true
	}
	return scalarText(w) == scalarText(a) && a != nil && w != nil
}

func scalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return compact(v)
}

// quantityChanges compares a quota's spec as Kubernetes quantities (the
// server answers canonical ones: "2000m" is "2").
func quantityChanges(path string, wanted, actual any) []change {
	w, _ := wanted.(map[string]any)
	a, _ := actual.(map[string]any)
	var out []change
	for _, k := range sortedKeys(w) {
		wq, err1 := resource.ParseQuantity(scalarText(w[k]))
		aq, err2 := resource.ParseQuantity(scalarText(a[k]))
		if err1 != nil || err2 != nil || wq.Cmp(aq) != 0 {
			out = append(out, change{join(path, k), a[k], w[k]})
		}
	}
	if len(a) != len(w) && len(out) == 0 {
		out = append(out, change{path, actual, wanted})
	}
	return out
}

// fingerprint is how the registry shows a kubeconfig.
func fingerprint(kubeconfig string) string {
	sum := sha256.Sum256([]byte(kubeconfig))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// plan is what apply does to one object: its changes and the body of the
// PUT that makes them (nil when unchanged).
func plan(d *document, actual map[string]any) ([]change, map[string]any) {
	var ch []change
	put := d.body
	switch {
	case !d.emco && d.kind.Name == "LogicalCloud":
		// Namespace, level and user are fixed at creation; a seed 002 body
		// is not the shape answered. Only the metadata is compared and put.
		if md, ok := d.body["metadata"]; ok {
			ch = changes("metadata", md, actual["metadata"])
			put = map[string]any{"metadata": md}
		}
	case !d.emco && d.kind.Name == "ClusterQuota":
		ch = append(changes("metadata", d.body["metadata"], actual["metadata"]),
			quantityChanges("spec", d.body["spec"], actual["spec"])...)
	default:
		ch = changes("", d.body, actual)
	}
	if d.kubeconfig != "" {
		// The kubeconfig is write-only: compare its fingerprint, and send it
		// only when it changed (a PUT without one keeps it).
		if fp := fingerprint(d.kubeconfig); lookup(actual, "status.kubeconfig-fingerprint") != fp {
			ch = append(ch, change{"kubeconfig", lookup(actual, "status.kubeconfig-fingerprint"), fp})
			put = withKubeconfig(put, d.kubeconfig)
		}
	}
	if len(ch) == 0 {
		return nil, nil
	}
	return ch, put
}

// withKubeconfig is body with spec.kubeconfig set (a copy).
func withKubeconfig(body map[string]any, kc string) map[string]any {
	out := map[string]any{}
	for k, v := range body {
		out[k] = v
	}
	spec := map[string]any{}
	if s, ok := body["spec"].(map[string]any); ok {
		for k, v := range s {
			spec[k] = v
		}
	}
	spec["kubeconfig"] = kc
	out["spec"] = spec
	return out
}
