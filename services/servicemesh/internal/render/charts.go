package render

import (
	_ "embed" // the DNSEndpoint CRD
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	loaderv2 "helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"istio.io/istio/manifests"
)

// Charts of the pinned istio.io/istio, as paths in manifests.FS.
const (
	// baseChart renders, with resourceScope namespace, only
	// istio-reader-service-account (what remote secrets are made for);
	// its CRDs and default validator are never rendered from it.
	baseChart      = "charts/base"
	discoveryChart = "charts/istio-control/istio-discovery"
	gatewayChart   = "charts/gateway"
	// crdFile holds Istio's CustomResourceDefinitions (the base chart's
	// copy of istio.io/api's kubernetes/customresourcedefinitions.gen.yaml).
	crdFile = "charts/base/files/crd-all.gen.yaml"
)

// dnsEndpointCRD is external-dns's DNSEndpoint CRD (copied from
// sigs.k8s.io/external-dns by `make generate`): installed with Istio's
// because the traffic controller's DNS provider intents write DNSEndpoint
// records on the mesh's clusters.
//
//go:embed crds/dnsendpoints.externaldns.k8s.io.yaml
var dnsEndpointCRD string

// kubeVersion is the Kubernetes version the charts render for: Istio's
// minimum (MinK8SVersion), as Istio's own installer does when it does not
// know the cluster's.
const kubeVersion = "v1.32.0"

var loadCharts = sync.OnceValues(func() (map[string]*chartv2.Chart, error) {
	out := map[string]*chartv2.Chart{}
	for _, dir := range []string{baseChart, discoveryChart, gatewayChart} {
		c, err := loadChart(manifests.FS, dir)
		if err != nil {
			return nil, fmt.Errorf("load chart %s: %w", dir, err)
		}
		out[dir] = c
	}
	return out, nil
})

// loadChart reads a chart from an fs.FS, as Istio's operator/pkg/helm does.
func loadChart(f fs.FS, root string) (*chartv2.Chart, error) {
	var files []*archive.BufferedFile
	err := fs.WalkDir(f, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(f, p)
		if err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: strings.TrimPrefix(p, root+"/"), Data: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loaderv2.LoadFiles(files)
}

// renderChart renders chart dir with vals into release namespace ns and
// answers its YAML documents, templates in name order (NOTES skipped).
func renderChart(dir, release, ns string, vals map[string]any) ([]string, error) {
	charts, err := loadCharts()
	if err != nil {
		return nil, err
	}
	c := charts[dir]
	caps := *common.DefaultCapabilities
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	rv, err := commonutil.ToRenderValues(c, vals, common.ReleaseOptions{Name: release, Namespace: ns}, &caps)
	if err != nil {
		return nil, fmt.Errorf("values for %s: %w", path.Base(dir), err)
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", path.Base(dir), err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if !strings.HasSuffix(n, ".txt") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var docs []string
	for _, n := range names {
		docs = append(docs, splitYAML(files[n])...)
	}
	return docs, nil
}

// splitYAML splits a multi-document YAML text at its "---" lines and drops
// empty documents (comments and whitespace only).
func splitYAML(s string) []string {
	var docs []string
	var cur strings.Builder
	flush := func() {
		if hasContent(cur.String()) {
			docs = append(docs, cur.String())
		}
		cur.Reset()
	}
	for line := range strings.Lines(s) {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

func hasContent(doc string) bool {
	for line := range strings.Lines(doc) {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

// CRDs are the CustomResourceDefinitions of a mesh cluster: Istio's of the
// pinned version and external-dns's DNSEndpoint, one JSON manifest each,
// ordered by name.
func CRDs() ([]string, error) {
	b, err := fs.ReadFile(manifests.FS, crdFile)
	if err != nil {
		return nil, err
	}
	var out []object
	for _, src := range []struct{ name, yaml string }{{crdFile, string(b)}, {"DNSEndpoint CRD", dnsEndpointCRD}} {
		for _, doc := range splitYAML(src.yaml) {
			o, err := parseObject(doc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src.name, err)
			}
			if o.str("kind") != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: %s %s is not a CRD", src.name, o.str("kind"), o.name())
			}
			out = append(out, o)
		}
	}
	sortObjects(out)
	crds := make([]string, len(out))
	for i, o := range out {
		if crds[i], err = o.json(); err != nil {
			return nil, err
		}
	}
	return crds, nil
}
