#!/usr/bin/env bash
# Builds Istio's pilot-discovery (hack/istio-build.sh), for the bench/xds
# comparison and the xDS interop tests. Prints its path.
exec "$(dirname "$0")/istio-build.sh" pilot-discovery istio.io/istio/pilot/cmd/pilot-discovery
