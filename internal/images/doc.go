// Package images assembles Strait's container images from Go binaries on
// disk, with no registry and no Docker daemon, and writes them as tarballs
// that `docker load`, `ctr images import` and `kind load image-archive`
// accept (go-containerregistry's tarball format).
//
// Three images, named like Istio's where Istio has one:
//
//   - straitd: the control plane (Istio's pilot).
//   - proxy: the sidecar and init image (Istio's proxyv2): strait-agent as
//     the entrypoint, strait-proxy beside it (the agent looks for it next
//     to its own executable), and the programs `strait-agent iptables`
//     runs: iptables-save/-restore (legacy and nft, IPv4 and IPv6) and ip,
//     copied from the build machine with the shared libraries they load.
//   - strait-echo: the test application.
//
// The Go binaries must be static (CGO_ENABLED=0): the straitd and echo
// images hold nothing else.
package images
