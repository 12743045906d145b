#!/usr/bin/env bash
# Builds Istio's pilot-agent (hack/istio-build.sh), for the CA interop test
# (internal/ca/server/istio_interop_test.go). Prints its path.
exec "$(dirname "$0")/istio-build.sh" pilot-agent istio.io/istio/pilot/cmd/pilot-agent
