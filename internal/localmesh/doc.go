// Package localmesh runs a Strait mesh on one Linux host, with no cluster:
// straitd in the host namespace reads a directory of Istio YAML, and every
// workload is a network namespace ("pod") on a private bridge with its
// traffic captured by `strait-agent iptables` and a sidecar started by
// `strait-agent proxy sidecar`; a WorkloadEntry that a Gateway selects is a
// gateway pod instead (`strait-agent proxy router`, no capture; gateway.go).
// The demo (`straitctl local demo`) and the
// end-to-end tests are built on it.
package localmesh
