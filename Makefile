# Distributed Cloud Manager: the two commands are `make run` and `make test`.
SHELL      := bash
.SHELLFLAGS := -eu -o pipefail -c
GO         ?= go
BIN        := $(CURDIR)/bin
# The checkout this Makefile is in (through a symlink too: the README
# walkthrough test runs it from a directory of its own): make images
# builds there, and make clusters loads its images from there.
REPO       := $(patsubst %/,%,$(dir $(realpath $(firstword $(MAKEFILE_LIST)))))
BUF        := $(BIN)/buf
GOLANGCI   := $(BIN)/golangci-lint
GRPCURL    := $(BIN)/grpcurl
# Every package of every workspace module (go.work). The targets name
# packages by import path, not ./dir, so that they build the workspace GOWORK
# names from any directory (the README's walkthrough test runs them so).
MODULE     := github.com/dcm-project/dcm
PKGS       := $(MODULE)/...
CLUSTERS   := $(GO) run $(MODULE)/platform/kubetest/cmd/dcm-clusters
# The test packages that take minutes, slowest first: go test starts
# packages in the order it is given them, and the run is as long as the
# last to finish. Their tests mostly wait on real clusters (at -p 2 the 2
# cores were idle half of a run), so TEST_P of them run at once.
SLOW_PKGS  := $(MODULE)/services/rsync/internal/engine $(MODULE)/services/allinone \
	$(MODULE)/services/allinone/nodes $(MODULE)/deploy/test $(MODULE)/services/allinone/walkthrough \
	$(MODULE)/platform/kubetest $(MODULE)/services/rsync/internal/rsync
TEST_P     ?= 3
# What `make generate` writes; CI fails if regenerating changes it.
# The last is external-dns's DNSEndpoint CRD, copied from its module: the
# service mesh installs it with Istio's CRDs (the traffic controller's DNS
# provider intents write DNSEndpoints).
GENERATED  := gen services/gateway/internal/openapi docs/configuration.md docs/security.md docs/store.md \
	platform/store/storeserver/users_gen.go \
	cmd/dcmctl/routes_gen.go \
	services/servicemesh/internal/render/crds/dnsendpoints.externaldns.k8s.io.yaml

# The fuzz targets, each "Name:package"; `make fuzz` runs each for FUZZTIME
# with FUZZPARALLEL workers (each REST worker runs a whole program).
FUZZ_TARGETS := FuzzRESTBodies:./services/allinone/ \
	FuzzRenderNamespace:./services/namespace/internal/namespace/ \
	FuzzRenderUsers:./services/user/internal/user/ \
	FuzzRenderQuotas:./services/quota/internal/quota/ \
	FuzzRender:./services/traffic/internal/render/
FUZZTIME     ?= 10m
FUZZPARALLEL ?= 2
# Minimize each new input with at most this many calls: the programs' own
# goroutines (store, engine loops) make coverage vary from call to call, and
# the default (60s of minimizing per new input) left the workers idle.
FUZZMINIMIZE ?= 20x

# Local Kubernetes clusters (make clusters N=3); their files go here.
# NODES=1 gives each a node that runs pods (needs root; docs/nodes.md),
# NODES=0 none (API objects only).
N          ?= 3
NODES      ?= 1
CLUSTERS_DIR ?= $(or $(DCM_DATA_DIR),.dcm)/clusters

.DEFAULT_GOAL := help
.PHONY: help grpcurl run check-ports build test test-unit test-all generate check-generated lint breaking clean \
	k8s-bins istio-bins images clusters clusters-down bench-rsync bench-lifecycle bench-rest fuzz \
	store-server test-store-server store-server-suites

## help: list the targets and what they do
help:
	@echo "Distributed Cloud Manager: make <target>"
	@awk -F': ' '/^## [a-z0-9-]+: / { printf "  %-16s %s\n", substr($$1, 4), substr($$0, length($$1) + 3) }' $(MAKEFILE_LIST)

## run: build and start the whole suite on the embedded store (REST :8080, gRPC :9090, data ./.dcm)
run: check-ports build
	$(BIN)/dcm

## check-ports: before make run builds anything, say which setting to change if its ports are taken
check-ports:
	@for s in "DCM_HTTP_ADDR=$${DCM_HTTP_ADDR:-127.0.0.1:8080}" "DCM_GRPC_ADDR=$${DCM_GRPC_ADDR:-127.0.0.1:9090}" "DCM_METRICS_ADDR=$${DCM_METRICS_ADDR:-}"; do \
		name=$${s%%=*}; addr=$${s#*=}; host=$${addr%:*}; port=$${addr##*:}; \
		if [ -n "$$port" ] && (exec 3<>"/dev/tcp/$${host:-127.0.0.1}/$$port") 2>/dev/null; then \
			echo "make run: $$addr is taken (another program listens there): set $$name to a free address, e.g. $$name=$${host:-127.0.0.1}:$$((port + 1)) make run"; exit 1; \
		fi; \
	done

## build: every program into bin/ (dcm = all-in-one; one per service; gateway)
build:
	$(GO) build -o $(BIN)/ $(PKGS)/cmd/...
	$(GO) build -o $(BIN)/dcmctl $(MODULE)/cmd/dcmctl

## test: everything CI runs: generated code up to date, lint, breaking check, all tests
test: check-generated lint breaking test-all

## test-all: every Go test, integration tests against real clusters included, and those that start a store server of their own (PostgreSQL: DCM_TEST_STORE_SERVER=1)
test-all: k8s-bins istio-bins images
	DCM_TEST_STORE_SERVER=1 $(GO) test -count=1 -timeout 30m -p $(TEST_P) $(SLOW_PKGS) $(PKGS)
	cd $(REPO)/test/grpcecho && GOWORK=off $(GO) test -count=1 ./...

## k8s-bins: build kube-apiserver, kube-controller-manager, kubectl, kube-scheduler, kubelet, kube-proxy (test/k8s) and kube-router (test/kube-router) into bin/k8s
k8s-bins:
	$(CLUSTERS) build

## istio-bins: build istiod (pilot-discovery, test/istio) into bin/istio; skipped while newer than test/istio/go.sum
istio-bins:
	$(CLUSTERS) build-istio

## images: an OCI image tarball per program (dcm.local/<program>), pause, agnhost, CoreDNS (test/coredns, the test clusters' kube-dns), the tests' proxyless gRPC echo (test/grpcecho) and Istio's pilot and proxyv2 (test/istio, into bin/images/istio) into bin/images, for ctr images import (docs/images.md); rewrites only what changed
images:
	cd $(REPO)/test/images && GOWORK=off $(GO) run ./cmd/dcm-images -root $(REPO)
	cd $(REPO)/test/coredns && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -o $(REPO)/bin/images/bin/coredns .
	cd $(REPO)/test/images && GOWORK=off $(GO) run ./cmd/dcm-images -binary $(REPO)/bin/images/bin/coredns -ref dcm.local/coredns:latest -out $(REPO)/bin/images/coredns.tar
	cd $(REPO)/test/grpcecho && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -o $(REPO)/bin/images/bin/grpcecho .
	cd $(REPO)/test/images && GOWORK=off $(GO) run ./cmd/dcm-images -binary $(REPO)/bin/images/bin/grpcecho -ref dcm.local/grpcecho:latest -out $(REPO)/bin/images/grpcecho.tar

## clusters: start N local Kubernetes clusters (etcd, kube-apiserver, kube-controller-manager; with NODES=1, the default, a scheduler and a node each, the images of make images loaded)
clusters: $(if $(filter 0,$(NODES)),,images)
	$(CLUSTERS) up -n $(N) -nodes $(NODES) -images $(REPO)/bin/images -dir $(CLUSTERS_DIR)

## clusters-down: stop the clusters `make clusters` started
clusters-down:
	$(CLUSTERS) down -dir $(CLUSTERS_DIR)

## bench-rsync: the rsync engine benchmark (1,000 simulated clusters, then 3 real ones)
bench-rsync:
	$(GO) run ./services/rsync/cmd/rsync-bench

## bench-lifecycle: apply a logical cloud on 3 real clusters until every kubeconfig works, 10 runs (p50)
bench-lifecycle: k8s-bins
	$(GO) test -run '^$$' -bench ApplyToUsableKubeconfigs -benchtime 10x -count 1 ./services/allinone/

## bench-rest: the REST data API through the gateway (HTTPS, bearer token): logical clouds created, read, listed, deleted at 1 and 8 clients beside a no-store ceiling, on the embedded store, then on a store server (PostgreSQL); writes both tables into docs/benchmarks.md
bench-rest:
	$(GO) run ./services/allinone/cmd/rest-bench -store embedded -out docs/benchmarks.md $(BENCHFLAGS)
	$(GO) run ./services/allinone/cmd/rest-bench -store server -out docs/benchmarks.md $(BENCHFLAGS)

## store-server: a store server that replicas on many machines share: PostgreSQL (Debian's, a cluster of its own on loopback) and FerretDB over TLS, a user per service; prints the URI files (docs/store.md, "The store server")
store-server:
	$(GO) build -o $(BIN)/dcm-store $(MODULE)/platform/store/cmd/dcm-store
	$(BIN)/dcm-store -dir $(or $(DCM_DATA_DIR),.dcm)/store-server

## test-store-server: the store, lease and replica suites against a store server of their own (FerretDB on PostgreSQL, each replica with its own connection), and DCM's store-server overlay rolling-restarted on a local cluster (not in make test)
test-store-server: k8s-bins images
	$(GO) build -o $(BIN)/dcm-store $(MODULE)/platform/store/cmd/dcm-store
	dir=$$(mktemp -d /tmp/dcm-store-test.XXXXXX); chmod 0711 $$dir; trap 'rm -rf $$dir' EXIT; \
		$(BIN)/dcm-store -dir $$dir/server -- $(MAKE) --no-print-directory -k store-server-suites

# What test-store-server runs, with DCM_TEST_MONGO_URI set by dcm-store:
# the store's conformance, lease and race-across-programs tests and the
# store server's own, core's locks, rsync's and traffic's replicas and
# its engine with a store server of its own killed mid-apply, and the
# whole-program replica tests; then the store-server overlay on a local
# cluster against a store server on its bridge, core and rsync
# rolling-restarted mid-apply (deploy/test, its own store server).
store-server-suites:
	@test -n "$${DCM_TEST_MONGO_URI:-}" || { echo "run by make test-store-server"; exit 1; }
	$(GO) test -count=1 -timeout 20m $(MODULE)/platform/store/...
	$(GO) test -count=1 -timeout 20m -run 'Locks' $(MODULE)/services/core/internal/core/
	$(GO) test -count=1 -timeout 20m -run 'Replica|Settled|StoreServerKilled' $(MODULE)/services/rsync/internal/engine/
	$(GO) test -count=1 -timeout 20m -run 'Replica' $(MODULE)/services/traffic/internal/dns/
	$(GO) test -count=1 -timeout 20m -run 'Replica' $(MODULE)/services/allinone/
	$(GO) test -count=1 -timeout 30m -run 'TestStoreServerOverlayRollingRestarts' $(MODULE)/deploy/test/

## fuzz: every fuzz target for FUZZTIME each (default 10m; make fuzz FUZZTIME=30s), one after another; a finding fails (not in make test, which runs their seeds)
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "== $${t%%:*} in $${t#*:} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) \
			-parallel $(FUZZPARALLEL) "$${t#*:}" || exit 1; \
	done

## test-unit: the fast tests only (no whole-program tests)
test-unit:
	$(GO) test -short -count=1 $(PKGS)

## generate: wipe gen/ (keeping its go.mod, go.sum), regenerate it and the OpenAPI document from proto/, the configuration table in docs/configuration.md, the gRPC caller table in docs/security.md, the database roles in docs/store.md, the list of EMCO's resources DCM does not serve in docs/emco.md, dcmctl's REST route table (cmd/dcmctl/routes_gen.go) and the copy of external-dns's DNSEndpoint CRD
generate: $(BUF)
	$(BUF) format -w
	find gen -mindepth 1 -maxdepth 1 ! -name go.mod ! -name go.sum -exec rm -rf {} +
	$(BUF) generate
	$(GO) run ./platform/server/cmd/confdoc docs/configuration.md
	$(GO) run ./platform/server/cmd/calltable docs/security.md
	$(GO) run ./services/allinone/cmd/storedoc docs/store.md platform/store/storeserver/users_gen.go
	$(GO) run ./services/gateway/cmd/emcodoc docs/emco.md
	$(GO) run ./platform/server/cmd/routetable cmd/dcmctl/routes_gen.go
	dir=$$(GOFLAGS=-mod=mod $(GO) mod download -json sigs.k8s.io/external-dns@v0.22.0 | grep -o '"Dir": *"[^"]*"' | cut -d'"' -f4); \
		test -n "$$dir"; install -D -m 0644 "$$dir/config/crd/standard/dnsendpoints.externaldns.k8s.io.yaml" \
		services/servicemesh/internal/render/crds/dnsendpoints.externaldns.k8s.io.yaml

## check-generated: make generate, then fail if it changed anything tracked (CI)
check-generated: generate
	@if [ -n "$$(git status --porcelain -- $(GENERATED) proto)" ]; then \
		echo "make generate changed tracked files: commit the regenerated code"; \
		git status --porcelain -- $(GENERATED) proto; git diff --stat -- $(GENERATED) proto; exit 1; fi
	@echo "generated code is up to date"

## lint: go vet, buf lint, golangci-lint
lint: $(BUF) $(GOLANGCI)
	$(GO) vet $(PKGS)
	$(BUF) lint
	$(GOLANGCI) run --allow-parallel-runners $(foreach m,$(shell $(GO) list -m -f '{{.Dir}}'),$(m)/...)

## breaking: buf breaking against the previous commit, once it has protos
breaking: $(BUF)
	@if git rev-parse -q --verify HEAD~1 >/dev/null && git cat-file -e HEAD~1:proto 2>/dev/null; then \
		$(BUF) breaking --against '.git#ref=HEAD~1'; echo "no breaking change against HEAD~1"; \
	else echo "breaking: HEAD~1 has no proto/ (or is not in this clone): nothing to compare"; fi

$(BUF): tools/go.mod tools/go.sum
	cd tools && GOWORK=off $(GO) build -o $(BUF) github.com/bufbuild/buf/cmd/buf

$(GOLANGCI): tools/lint/go.mod tools/lint/go.sum
	cd tools/lint && GOWORK=off $(GO) build -o $(GOLANGCI) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## grpcurl: build grpcurl into bin/ (for debugging the gRPC APIs)
grpcurl: $(GRPCURL)

$(GRPCURL): tools/grpcurl/go.mod tools/grpcurl/go.sum
	cd tools/grpcurl && GOWORK=off $(GO) build -o $(GRPCURL) github.com/fullstorydev/grpcurl/cmd/grpcurl

## clean: remove bin/
clean:
	rm -rf $(BIN)
