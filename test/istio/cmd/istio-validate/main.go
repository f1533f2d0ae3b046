// Command istio-validate checks Istio configuration objects with the
// validation of the pinned istio.io/istio (the one istiod and its
// validating webhook run), so that tests see what istiod would refuse or
// warn about in what DCM renders.
//
// It reads a stream of JSON or YAML objects on stdin and writes one JSON
// line per object: {"kind", "namespace", "name", "errors", "warnings"}.
// An object that is not an Istio kind, has fields Istio's types do not
// know, or fails validation has errors. The exit status is 1 when any
// object has an error, 2 when the input cannot be read, 0 otherwise
// (warnings alone do not fail: the caller decides which it accepts).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/hashicorp/go-multierror"
	kubeyaml "k8s.io/apimachinery/pkg/util/yaml"

	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/collections"
)

// result is one object's outcome.
type result struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Errors    []string `json:"errors"`
	Warnings  []string `json:"warnings"`
}

// object is the part of a Kubernetes object the validation reads.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// topLevel are the fields an Istio object may have, as istioctl validate
// checks them: anything else would be dropped by the API server's
// pruning, so a renderer writing it is wrong.
var topLevel = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "spec": true, "status": true}

func main() {
	failed, err := run(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "istio-validate:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// run validates every object of in and reports whether any has an error.
func run(in io.Reader, out io.Writer) (bool, error) {
	dec := kubeyaml.NewYAMLOrJSONDecoder(bufio.NewReader(in), 4096)
	w := bufio.NewWriter(out)
	failed := false
	for {
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return failed, fmt.Errorf("decode: %w", err)
		}
		if len(raw) == 0 {
			continue
		}
		r := validate(raw)
		if len(r.Errors) > 0 {
			failed = true
		}
		line, err := json.Marshal(r)
		if err != nil {
			return failed, err
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return failed, err
		}
	}
	return failed, w.Flush()
}

// validate checks one object the way istioctl validate does: its schema
// by group, version and kind among pilot's collections, strict decoding
// of spec into Istio's proto type, then the schema's ValidateConfig.
func validate(raw map[string]json.RawMessage) result {
	var r result
	b, err := json.Marshal(raw)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	r.Kind, r.Namespace, r.Name = o.Kind, o.Metadata.Namespace, o.Metadata.Name
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !topLevel[k] {
			r.Errors = append(r.Errors, fmt.Sprintf("unknown field %q", k))
		}
	}
	gv, err := parseAPIVersion(o.APIVersion)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	gvk := config.GroupVersionKind{Group: gv[0], Version: gv[1], Kind: o.Kind}
	schema, ok := collections.Pilot.FindByGroupVersionAliasesKind(gvk)
	if !ok {
		r.Errors = append(r.Errors, fmt.Sprintf("%s is not an Istio kind", gvk))
		return r
	}
	spec, err := schema.NewInstance()
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	js := string(o.Spec)
	if js == "" || js == "null" {
		js = "{}"
	}
	if err := config.ApplyJSONStrict(spec, js); err != nil {
		r.Errors = append(r.Errors, "spec: "+err.Error())
		return r
	}
	cfg := config.Config{
		Meta: config.Meta{
			GroupVersionKind: schema.GroupVersionKind(),
			Name:             o.Metadata.Name,
			Namespace:        o.Metadata.Namespace,
			Labels:           o.Metadata.Labels,
			Annotations:      o.Metadata.Annotations,
		},
		Spec: spec,
	}
	warn, err := schema.ValidateConfig(cfg)
	r.Errors = append(r.Errors, split(err)...)
	r.Warnings = append(r.Warnings, split(warn)...)
	return r
}

// parseAPIVersion splits group/version ("v1" alone is the core group).
func parseAPIVersion(s string) ([2]string, error) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return [2]string{s[:i], s[i+1:]}, nil
		}
	}
	if s == "" {
		return [2]string{}, errors.New("apiVersion is missing")
	}
	return [2]string{"", s}, nil
}

// split lists the single errors of a (multi)error.
func split(err error) []string {
	if err == nil {
		return nil
	}
	var m *multierror.Error
	if errors.As(err, &m) {
		var out []string
		for _, e := range m.WrappedErrors() {
			out = append(out, split(e)...)
		}
		return out
	}
	return []string{err.Error()}
}
