# Strait: `make demo` runs the local mesh demo, `make test` runs every test.
# Both install what they need (Debian packages) when it is missing.

GO       ?= go
BIN      := $(CURDIR)/bin
BINARIES := straitd strait-agent strait-proxy straitctl strait-echo
GOTEST_FLAGS ?=
# grpcnotrace: gRPC without golang.org/x/net/trace, whose /debug/requests
# pages link html/template and text/template's reflect-by-name method
# calls, which keep every exported method of every linked type (each
# protobuf message's getters, PGV validators): strait-agent 30 -> 22 MB,
# strait-proxy 43 -> 35 MB, the start-up's resident file pages with them
# (bench/README.md, issue #24). gRPC tracing is never enabled here.
GO_TAGS  ?= grpcnotrace

.PHONY: all build deps test test-unit demo lint fmt clean istio-bins images

all: build

deps:
	@./scripts/install-deps.sh

# Static binaries (no libc, no ld.so mapped: less memory per sidecar), as
# the container images ship them.
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -tags $(GO_TAGS) -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

# Everything: vet, unit tests with the race detector, and the tests that need
# root (network namespaces, real iptables, real sidecars, a real
# kube-apiserver built from its Go module by kube-testenv).
# Istio's own pilot-agent and pilot-discovery (for the CA and xDS interop
# tests) are built first, outside the tests' timeouts: the first, uncached
# build takes minutes and prints its progress.
test: deps build kube-testenv istio-bins
	$(GO) vet ./...
	STRAIT_BIN_DIR=$(BIN) STRAIT_KUBE_TESTENV_REQUIRED=1 \
	STRAIT_PILOT_AGENT=$$(./hack/pilot-agent-build.sh) STRAIT_PILOT_DISCOVERY=$$(./hack/pilot-discovery-build.sh) \
	$(GO) test -race -count=1 -timeout 40m $(GOTEST_FLAGS) ./...

# The unprivileged tests only, in minutes: `go test -short`, under which
# every test that needs root, network namespaces, a real binary (nginx,
# iptables, curl, the go tool) or a built test environment (kube-apiserver,
# the one-node cluster, Istio's binaries, the e2e binaries) skips itself
# through internal/testreq.Privileged. No race detector: `make test` has it.
test-unit:
	$(GO) test -short -count=1 -timeout 15m $(GOTEST_FLAGS) ./...

# Container images as tarballs (bin/images/NAME.tar, docker-save format:
# `docker load`, `ctr images import`, `kind load image-archive`), built
# from static binaries with no registry and no Docker daemon; the proxy
# image carries the build machine's iptables and ip (see docs/install.md).
IMAGE_HUB ?= strait
IMAGE_TAG ?= latest
images: deps
	@mkdir -p $(BIN)/static
	CGO_ENABLED=0 $(GO) build -tags $(GO_TAGS) -trimpath -o $(BIN)/static/ ./cmd/straitd ./cmd/strait-agent ./cmd/strait-proxy ./cmd/strait-echo
	$(GO) run ./hack/images --bin-dir $(BIN)/static --out-dir $(BIN)/images --hub $(IMAGE_HUB) --tag $(IMAGE_TAG)

demo: deps build
	$(BIN)/straitctl local demo --config-dir examples/demo --bin-dir $(BIN)

# Pinned developer tools, built from their Go modules into a cache that
# `make clean` keeps (one directory per version).
TOOLS_DIR             ?= $(HOME)/.cache/strait/tools
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT         := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

$(GOLANGCI_LINT):
	@echo "lint: building golangci-lint $(GOLANGCI_LINT_VERSION) from its module (once; a few minutes)"
	GOBIN=$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# gofmt, go vet, and golangci-lint with the linters of .golangci.yml
# (errcheck, staticcheck, revive, sloglint, unused, contextcheck, errorlint,
# ineffassign).
lint: $(GOLANGCI_LINT)
	@out=$$(gofmt -l $$(git ls-files '*.go') || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)

# Builds kube-apiserver and etcd for the Kubernetes tests (internal/kubeapiserver),
# and kubelet, kube-controller-manager, kube-scheduler and kube-proxy as one
# binary for the one-node cluster (internal/kubenode), from their Go modules,
# outside this module; cached per version in $STRAIT_KUBE_CACHE (default
# ~/.cache/strait/kube): a second run returns at once. The first, uncached
# build of the node binary took 15 minutes on a busy 2-core machine.
.PHONY: kube-testenv
kube-testenv:
	@./hack/kube-testenv-build.sh >/dev/null

istio-bins:
	@./hack/pilot-agent-build.sh >/dev/null
	@./hack/pilot-discovery-build.sh >/dev/null

# The upstream Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance)
# against Strait on the one-node cluster (test/conformance, build tag
# conformance; not part of `make test`: about an hour on 2 cores). It
# builds Strait's images and the suite's echo backend from source, installs
# straitd and the Gateway API CRDs, runs the GATEWAY-HTTP and GATEWAY-GRPC
# profiles, writes bin/gateway-conformance-report.yaml (the suite's
# ConformanceReport), its log, and prints a summary (every skip with its
# reason). CONFORMANCE_RUN_TEST=ShortName runs one test,
# CONFORMANCE_PROFILES and CONFORMANCE_SKIP (comma-separated) narrow it.
# CONFORMANCE_PROFILES=MESH-HTTP (or MESH-GRPC) runs the mesh profiles:
# it also builds Istio's echo server and client (hack/istio-build.sh) as
# the mesh's backend and labels the suite's namespaces for injection.
CONFORMANCE_RUN_TEST ?=
CONFORMANCE_PROFILES ?=
CONFORMANCE_SKIP     ?=
.PHONY: gateway-conformance
gateway-conformance: deps kube-testenv
	@mkdir -p $(BIN) && rm -f $(BIN)/gateway-conformance-report-summary.txt
	@echo "gateway-conformance: log in $(BIN)/gateway-conformance.log"
	@STRAIT_KUBE_TESTENV_REQUIRED=1 STRAIT_REQUIRE_ALL=1 \
	STRAIT_CONFORMANCE_REPORT=$(BIN)/gateway-conformance-report.yaml \
	STRAIT_CONFORMANCE_RUN_TEST='$(CONFORMANCE_RUN_TEST)' STRAIT_CONFORMANCE_PROFILES='$(CONFORMANCE_PROFILES)' \
	STRAIT_CONFORMANCE_SKIP='$(CONFORMANCE_SKIP)' \
	$(GO) test -tags conformance -count=1 -timeout 180m -v -run 'TestGatewayAPIConformance$$' ./test/conformance/ \
		>$(BIN)/gateway-conformance.log 2>&1; rc=$$?; \
	if [ -f $(BIN)/gateway-conformance-report-summary.txt ]; then \
		cat $(BIN)/gateway-conformance-report-summary.txt; else tail -40 $(BIN)/gateway-conformance.log; fi; \
	exit $$rc

# HTTP/1.1 data plane against nginx and HAProxy, two-hop chain on loopback
# (installs wrk, nginx-light and haproxy when missing). See bench/http.
# bench-http-h2 (h2load), bench-http-grpc (a grpc-go load client against
# nginx grpc_pass) and bench-http-idle (RSS with 10,000 idle keep-alive
# connections) are the HTTP/2, gRPC and memory rows; bench-http-gateway is
# an ingress gateway with TLS termination, 100 routes and 1,000 backends.
.PHONY: bench-http bench-http-h2 bench-http-grpc bench-http-idle bench-http-gateway bench-xds bench-sidecar
bench-http:
	./bench/http/run.sh
bench-http-h2:
	./bench/http/h2.sh
bench-http-grpc:
	./bench/http/grpc.sh
bench-http-idle:
	./bench/http/idle.sh
bench-http-gateway:
	./bench/http/gateway.sh

# The xDS load harness (see bench/xds/README.md for the knobs).
bench-xds:
	$(GO) run ./bench/xds -proxies 1000 -services 1000 -endpoints 10

# One sidecar's memory and start with 1,000 services in scope and with a
# Sidecar scoping it to 10 (root: network namespaces). BASELINE=DIR adds
# another build's strait-agent and strait-proxy to the same run.
bench-sidecar: build
	$(GO) run ./bench/sidecar -services 1000 -scope 10 $(if $(BASELINE),-baseline $(BASELINE))

# Mutation testing (gremlins, pinned; installed into bin/tools from its
# module): killed / survived / score per package. Not part of `make test`:
# minutes per package. PKG takes one or more package directories.
GREMLINS_VERSION := v0.6.0
TOOLS            := $(BIN)/tools
MUTATE_PKGS      := ./internal/iptables ./internal/inject ./internal/xds/gen ./internal/istioconfig ./internal/istioconfig/validate ./internal/istioconfig/support ./internal/proxy/http1
PKG              ?= $(MUTATE_PKGS)

.PHONY: mutate gremlins
mutate: gremlins
	@command -v jq >/dev/null || { echo "mutate: installing jq"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq; }
	GREMLINS=$(TOOLS)/gremlins ./hack/mutate.sh $(PKG)

gremlins:
	@if ! $(GO) version -m $(TOOLS)/gremlins 2>/dev/null | grep -q 'mod[[:space:]]*github.com/go-gremlins/gremlins[[:space:]]*$(GREMLINS_VERSION)[[:space:]]'; then \
		echo "installing gremlins $(GREMLINS_VERSION) into $(TOOLS)"; \
		mkdir -p $(TOOLS) && GOBIN=$(TOOLS) GOFLAGS= $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION); \
	fi
