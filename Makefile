# Strait: `make demo` runs the local mesh demo, `make test` runs every test.
# Both install what they need (Debian packages) when it is missing.

GO       ?= go
BIN      := $(CURDIR)/bin
BINARIES := straitd strait-agent strait-proxy straitctl strait-echo
GOTEST_FLAGS ?=

.PHONY: all build deps test test-unit demo lint fmt clean

all: build

deps:
	@./scripts/install-deps.sh

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

# Everything: vet, unit tests with the race detector, and the tests that need
# root (network namespaces, real iptables, real sidecars).
test: deps build
	$(GO) vet ./...
	STRAIT_BIN_DIR=$(BIN) $(GO) test -race -count=1 -timeout 30m $(GOTEST_FLAGS) ./...

demo: deps build
	$(BIN)/straitctl local demo --config-dir examples/demo --bin-dir $(BIN)

lint:
	@out=$$(gofmt -l . | grep -v '^vendor/' || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
