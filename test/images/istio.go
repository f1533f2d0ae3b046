package images

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Istio's images as the charts DCM renders name them: global.hub and
// global.tag are DCM_ISTIO_HUB and DCM_ISTIO_TAG (platform/server/config.go,
// defaults docker.io/istio and 1.31.0), istiod's image is <hub>/pilot:<tag>
// (istiod chart, pilot.image) and the injected agent's <hub>/proxyv2:<tag>
// (global.proxy.image, which the grpc-agent injection template runs).
const (
	IstioHub = "docker.io/istio"
	IstioTag = "1.31.0"
	// IstioUID is the user Istio's images and its charts run istiod and
	// the injected agent as (runAsUser 1337).
	IstioUID = 1337
	// IstioDir is where under out the Istio images go: not among the
	// images every test node loads (bin/images/*.tar), they are loaded by
	// the tests that run a mesh.
	IstioDir = "istio"
)

// buildIstio builds pilot-discovery (istiod) and pilot-agent from the
// pinned istio.io/istio of the tools module test/istio (GOWORK=off: its
// dependency graph is not the product's), static and stripped, and
// describes their images: the binary at the path of Istio's own images
// (/usr/local/bin, pilot/docker/Dockerfile.pilot and Dockerfile.proxyv2),
// the base layer, user 1337. proxyv2 holds no Envoy: it serves the
// proxyless templates (grpc-agent), not the sidecar one.
func buildIstio(ctx context.Context, root, binDir string) ([]spec, error) {
	dir := filepath.Join(root, "test", "istio")
	// No -trimpath: with the flags of `make istio-bins` (istiotest.Build)
	// the compiled packages are shared with that build, so a cold run
	// compiles Istio's dependency tree once, not twice.
	if err := goBuild(ctx, dir, []string{"GOWORK=off"}, "-ldflags=-s -w", "-o", binDir+"/",
		"istio.io/istio/pilot/cmd/pilot-discovery", "istio.io/istio/pilot/cmd/pilot-agent"); err != nil {
		return nil, err
	}
	created := time.Unix(0, 0).UTC()
	var specs []spec
	for _, im := range []struct{ repo, bin string }{{"pilot", "pilot-discovery"}, {"proxyv2", "pilot-agent"}} {
		specs = append(specs, spec{
			Name:       filepath.Join(IstioDir, im.repo),
			Refs:       []string{IstioHub + "/" + im.repo + ":" + IstioTag},
			Binary:     filepath.Join(binDir, im.bin),
			Path:       "/usr/local/bin/" + im.bin,
			Entrypoint: []string{"/usr/local/bin/" + im.bin},
			User:       fmt.Sprintf("%d:%d", IstioUID, IstioUID),
			Base:       true,
			Labels: map[string]string{
				"org.opencontainers.image.title":  im.bin,
				"org.opencontainers.image.source": "istio.io/istio (test/istio/go.mod)",
			},
			Created: created,
		})
	}
	return specs, nil
}
