package kube

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Label keys of every object a logical cloud puts on a cluster, so that
// all of them can be listed by label.
const (
	// ProjectLabel is the project's name.
	ProjectLabel = "dcm.io/project"
	// LogicalCloudLabel is the logical cloud's name.
	LogicalCloudLabel = "dcm.io/logical-cloud"
)

// Labels are the labels of the objects logical cloud lc of project puts
// on clusters.
func Labels(project, lc string) map[string]string {
	return map[string]string{ProjectLabel: project, LogicalCloudLabel: lc}
}

// Meta is the metadata of a rendered object: what its owner sets, never
// what the cluster does.
type Meta struct {
	Name      string
	Namespace string // empty for cluster-scoped kinds
	Labels    map[string]string
	// Annotations are for the cluster's controllers (which ServiceAccount
	// a token Secret is for).
	Annotations map[string]string
}

// Manifest is an object as JSON: apiVersion, kind, meta, and body's
// top-level fields (spec, rules, type...). Maps marshal with their keys
// sorted, so the same input gives the same bytes: a rendered object that
// did not change is not applied again.
func Manifest(apiVersion, kind string, meta Meta, body map[string]any) string {
	md := map[string]any{"name": meta.Name}
	if meta.Namespace != "" {
		md["namespace"] = meta.Namespace
	}
	if len(meta.Labels) > 0 {
		md["labels"] = meta.Labels
	}
	if len(meta.Annotations) > 0 {
		md["annotations"] = meta.Annotations
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	maps.Copy(obj, body)
	b, err := json.Marshal(obj)
	if err != nil {
		// Bodies are maps, slices and strings: a value that does not
		// marshal is a bug in the caller.
		panic(fmt.Sprintf("kube.Manifest %s %s: %v", kind, meta.Name, err))
	}
	return string(b)
}
