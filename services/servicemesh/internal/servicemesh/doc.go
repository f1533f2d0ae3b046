// Package servicemesh implements the service mesh service: each logical
// cloud's control plane record (public API), and, told by core, the
// rendering of its Istio control planes per cluster from Istio's own charts
// (package render) with the intermediates CA distribution issues, stored
// as the logical cloud's service mesh document without any key. It never
// calls core or rsync: core tells it everything and applies what it
// answers.
//
// It must not call core, rsync or any cluster: it renders and stores, and
// only CA distribution (below it) is asked for keys.
package servicemesh
