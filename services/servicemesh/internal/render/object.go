package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// object is a Kubernetes object as generic JSON.
type object map[string]any

// parseObject reads one YAML document as a Kubernetes object: it must have
// apiVersion, kind and metadata.name.
func parseObject(doc string) (object, error) {
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var o object
	if err := d.Decode(&o); err != nil {
		return nil, err
	}
	if o.str("apiVersion") == "" || o.str("kind") == "" || o.name() == "" {
		return nil, errors.New("not a Kubernetes object (apiVersion, kind, metadata.name): " + firstLine(doc))
	}
	return o, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (o object) str(k string) string { v, _ := o[k].(string); return v }

func (o object) meta() map[string]any {
	m, _ := o["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o["metadata"] = m
	}
	return m
}

func (o object) name() string      { v, _ := o.meta()["name"].(string); return v }
func (o object) namespace() string { v, _ := o.meta()["namespace"].(string); return v }

// addLabels sets labels on the object's metadata (kept: the chart's own).
func (o object) addLabels(labels map[string]string) {
	m := o.meta()
	l, _ := m["labels"].(map[string]any)
	if l == nil {
		l = map[string]any{}
		m["labels"] = l
	}
	for k, v := range labels {
		l[k] = v
	}
}

// json is the object as compact JSON, keys sorted, HTML left unescaped.
func (o object) json() (string, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(map[string]any(o)); err != nil {
		return "", fmt.Errorf("%s %s: %w", o.str("kind"), o.name(), err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// rank puts the objects others live in first (rsync orders them too; this
// only makes the output read top-down).
func rank(kind string) int {
	switch kind {
	case "CustomResourceDefinition", "Namespace":
		return 0
	case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return 1
	}
	return 2
}

// sortObjects orders objects by rank, kind, namespace and name.
func sortObjects(objs []object) {
	slices.SortStableFunc(objs, func(a, b object) int {
		if c := rank(a.str("kind")) - rank(b.str("kind")); c != 0 {
			return c
		}
		for _, p := range [][2]string{{a.str("kind"), b.str("kind")}, {a.namespace(), b.namespace()}, {a.name(), b.name()}} {
			if c := strings.Compare(p[0], p[1]); c != 0 {
				return c
			}
		}
		return 0
	})
}
