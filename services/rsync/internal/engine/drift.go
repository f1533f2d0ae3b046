package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Drift: an object rsync applied that someone else changed or deleted on
// the cluster. driftwatch.go notices it (a watch per kind, a periodic
// full compare); this file says what changed and who changed it, records
// it in the cluster's state, and marks the resource for a repair, a
// forced apply that the cluster's next pass makes (step.go).

// ManagedLabel is stamped, with the value "true", on every object rsync
// applies, so that one watch per kind and cluster, filtered by it, sees
// rsync's objects only.
const ManagedLabel = "dcm.io/managed-by-rsync"

// maxDrift is how many drift records a cluster's state keeps (the newest).
const maxDrift = 20

var driftTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "dcm_rsync_drift_total",
	Help: "Changes made on clusters to objects rsync applied, by kind and result (repaired, reported: the rollout only reports drift, failed: the repair failed).",
}, []string{"kind", "result"})

// pathSeg is one step of a field path: a map key (string) or a list index
// (int).
type pathSeg = any

// fieldDiff is one field the desired manifest sets that the live object
// lacks or holds with another value.
type fieldDiff struct {
	path    []pathSeg
	present bool // the live object has the field (with another value)
}

// driftOf compares live with want (the manifest as rsync applies it,
// stamped): the JSON paths of the fields want sets that live lacks or
// holds with another value, and the field managers other than mine that
// own them. Only what want sets is compared, so fields the API server
// defaults or fills are not drift; quantities compare by value ("1Gi" is
// "1073741824"). A field that differs but only mine owns is the API
// server's normalization of what rsync applied, not drift.
func driftOf(want, live *unstructured.Unstructured, mine string) (fields, managers []string) {
	var diffs []fieldDiff
	for k, v := range want.Object {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			wm, _ := v.(map[string]any)
			lm, _ := live.Object["metadata"].(map[string]any)
			for _, f := range []string{"labels", "annotations"} {
				if wv, ok := wm[f]; ok {
					lv, lok := lm[f]
					compareField([]pathSeg{"metadata", f}, wv, lv, lok, &diffs)
				}
			}
			continue
		case "stringData":
			if want.GetKind() == "Secret" && want.GroupVersionKind().Group == "" {
				continue // written into data by the API server, never stored
			}
		}
		lv, ok := live.Object[k]
		compareField([]pathSeg{k}, v, lv, ok, &diffs)
	}
	sets := fieldSets(live)
	seen := map[string]bool{}
	for _, d := range diffs {
		var others []string
		byMine := false
		for _, s := range sets {
			if !owns(s.set, d.path) {
				continue
			}
			if s.manager == mine {
				byMine = true
			} else {
				others = append(others, s.manager)
			}
		}
		if d.present && byMine && len(others) == 0 {
			continue
		}
		fields = append(fields, renderPath(d.path))
		for _, m := range others {
			if !seen[m] {
				seen[m] = true
				managers = append(managers, m)
			}
		}
	}
	slices.Sort(fields)
	slices.Sort(managers)
	return fields, managers
}

// compareField appends to out the fields under path where want (set by
// the manifest) and got (live; ok false if absent) differ.
func compareField(path []pathSeg, want, got any, ok bool, out *[]fieldDiff) {
	here := func(present bool) {
		*out = append(*out, fieldDiff{path: slices.Clone(path), present: present})
	}
	switch w := want.(type) {
	case map[string]any:
		g, isMap := got.(map[string]any)
		if !ok || !isMap {
			here(ok && got != nil)
			return
		}
		for k, v := range w {
			gv, gok := g[k]
			compareField(append(path, k), v, gv, gok, out)
		}
	case []any:
		g, isList := got.([]any)
		if !ok || !isList || len(g) != len(w) {
			here(ok && got != nil)
			return
		}
		for i := range w {
			compareField(append(path, i), w[i], g[i], true, out)
		}
	case nil:
		if ok && got != nil {
			here(true) // the manifest asks for no value
		}
	default:
		if !ok || got == nil {
			here(false)
		} else if !sameScalar(want, got) {
			here(true)
		}
	}
}

// sameScalar compares two JSON scalars: numbers by value, quantities by
// value, the rest as they are.
func sameScalar(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	if x, ok := number(a); ok {
		if y, ok := number(b); ok && x == y {
			return true
		}
	}
	qa, oka := quantity(a)
	qb, okb := quantity(b)
	return oka && okb && qa.Cmp(qb) == 0
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func quantity(v any) (resource.Quantity, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64, float64, int:
		s = fmt.Sprint(x)
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// fieldSet is the fields one manager owns in an object (managedFields'
// fieldsV1), main resource only.
type fieldSet struct {
	manager string
	set     map[string]any
}

func fieldSets(u *unstructured.Unstructured) []fieldSet {
	var out []fieldSet
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &set) != nil {
			continue
		}
		out = append(out, fieldSet{manager: mf.Manager, set: set})
	}
	return out
}

// owns says whether a fieldsV1 set holds path: the field itself, or an
// atomic map or list above it. At a list element it answers whether the
// manager owns any part of the list (elements are keyed by value or merge
// key there, not by index).
func owns(set map[string]any, path []pathSeg) bool {
	node := set
	for _, seg := range path {
		key, isKey := seg.(string)
		if !isKey {
			return len(node) > 0
		}
		child, ok := node["f:"+key]
		if !ok {
			return false
		}
		m, _ := child.(map[string]any)
		if len(m) == 0 {
			return true // a leaf, or atomic: owned as a whole
		}
		node = m
	}
	return true
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// renderPath writes a path as JSON path: .spec.hard.pods, .rules[0],
// .metadata.labels["dcm.io/test"].
func renderPath(path []pathSeg) string {
	var b strings.Builder
	for _, seg := range path {
		switch s := seg.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		case string:
			if plainKey.MatchString(s) {
				b.WriteString("." + s)
			} else {
				fmt.Fprintf(&b, "[%q]", s)
			}
		}
	}
	return b.String()
}
