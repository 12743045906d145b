// Package conformance runs the upstream Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance, the release of the Gateway API
// module Strait translates) against Strait on the one-node cluster of the
// tests (internal/kubenode): `make gateway-conformance`. Nothing is
// pulled: the suite's echo backend is built from the conformance module's
// source into an image (internal/images), and the manifests the suite
// applies are rewritten to name it. TestGatewayAPIConformance is behind
// the conformance build tag (not part of `go test ./...`); see it and the
// Conformance section of docs/gateway-api.md.
package conformance
