// Package istiometrics computes Istio's standard metrics: the label values
// of istio_requests_total and its siblings from the local workload, the
// peer's (learned through the metadata exchange, package peermeta) and
// what happened to the request or connection, and records them in the
// proxy's stats store with Istio's names, types, buckets and label order
// (istio/proxy source/extensions/filters/http/istio_stats and the
// expectations of its testdata/metric/*.yaml.tmpl).
//
// Only the labels below exist: none carries a path, a query or a header
// value the client chose, so the series count grows with the number of
// peers and services, not with the requests.
package istiometrics

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/straitmesh/strait/internal/proxy/peermeta"
)

// Reporter is which side of an exchange records it.
type Reporter uint8

const (
	// Destination is the server's sidecar (an inbound listener).
	Destination Reporter = iota
	// Source is the client's sidecar or a gateway (an outbound listener).
	Source
)

func (r Reporter) String() string {
	if r == Source {
		return "source"
	}
	return "destination"
}

// Unknown is the value of a label nothing is known about.
const Unknown = "unknown"

// HTTPLabels are the labels of istio_requests_total,
// istio_request_duration_milliseconds, istio_request_bytes and
// istio_response_bytes, in Istio's order.
var HTTPLabels = []string{
	"reporter",
	"source_workload", "source_canonical_service", "source_canonical_revision",
	"source_workload_namespace", "source_principal", "source_app", "source_version", "source_cluster",
	"destination_workload", "destination_workload_namespace", "destination_principal",
	"destination_app", "destination_version", "destination_service",
	"destination_canonical_service", "destination_canonical_revision",
	"destination_service_name", "destination_service_namespace", "destination_cluster",
	"request_protocol", "response_code", "grpc_response_status", "response_flags",
	"connection_security_policy",
}

// TCPLabels are the labels of the istio_tcp_* counters: HTTPLabels
// without response_code and grpc_response_status.
var TCPLabels = []string{
	"reporter",
	"source_workload", "source_canonical_service", "source_canonical_revision",
	"source_workload_namespace", "source_principal", "source_app", "source_version", "source_cluster",
	"destination_workload", "destination_workload_namespace", "destination_principal",
	"destination_app", "destination_version", "destination_service",
	"destination_canonical_service", "destination_canonical_revision",
	"destination_service_name", "destination_service_namespace", "destination_cluster",
	"request_protocol", "response_flags", "connection_security_policy",
}

// Service is the destination service of a request or connection.
type Service struct {
	Host, Name, Namespace string
}

// ServiceFromCluster reads the destination service from an Istio cluster
// name, outbound|PORT|SUBSET|HOST: host HOST, name and namespace its first
// two labels when HOST is a Kubernetes service name
// (NAME.NAMESPACE.svc.DOMAIN), else name HOST. ok is false for another
// name (inbound|PORT||, PassthroughCluster, BlackHoleCluster).
func ServiceFromCluster(cluster string) (Service, bool) {
	host, ok := clusterHost(cluster)
	if !ok {
		return Service{}, false
	}
	return ServiceFromHost(host), true
}

// IsServiceCluster reports whether ServiceFromCluster reads a service
// from cluster's name.
func IsServiceCluster(cluster string) bool {
	_, ok := clusterHost(cluster)
	return ok
}

// clusterHost is HOST of outbound|PORT|SUBSET|HOST, ok false for another
// name or an empty HOST.
func clusterHost(cluster string) (host string, ok bool) {
	rest, ok := strings.CutPrefix(cluster, "outbound|")
	if !ok {
		return "", false
	}
	_, rest, ok = strings.Cut(rest, "|") // PORT
	if !ok {
		return "", false
	}
	_, host, ok = strings.Cut(rest, "|") // SUBSET
	return host, ok && host != ""
}

// ServiceFromHost is the service named by a host (a Host header without
// its port, or the host of a cluster name).
func ServiceFromHost(host string) Service {
	s := Service{Host: host, Name: host, Namespace: Unknown}
	if name, rest, ok := strings.Cut(host, "."); ok {
		if ns, rest, ok := strings.Cut(rest, "."); ok && (rest == "svc" || strings.HasPrefix(rest, "svc.")) {
			s.Name, s.Namespace = name, ns
		}
	}
	return s
}

// HostWithoutPort strips a ":port" from a Host header value (and the
// brackets of an IPv6 literal).
func HostWithoutPort(h string) string {
	i := strings.IndexByte(h, ':')
	if i < 0 {
		return h // a name or an IPv4 address without a port
	}
	if i > 0 && h[0] != '[' && i == strings.LastIndexByte(h, ':') && allDigits(h[i+1:]) {
		return h[:i] // name:port or IPv4:port, without parsing an address
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().String()
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i+1:], "]") && strings.Count(h, ":") == 1 {
		return h[:i]
	}
	return h
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Exchange is what the labels are computed from: one HTTP request or one
// TCP connection, from the reporter's point of view.
type Exchange struct {
	Reporter Reporter
	// Local is this proxy's workload; Peer the other side's as the
	// metadata exchange told it (zero: unknown).
	Local, Peer peermeta.Workload
	// LocalPrincipal and PeerPrincipal are the SPIFFE identities of the
	// two sides ("" unknown): the peer's from its mTLS certificate.
	LocalPrincipal, PeerPrincipal string
	Service                       Service // zero: unknown
	// Protocol is "http", "grpc" or "tcp".
	Protocol string
	// Code is the response status (0: none), GRPCStatus the gRPC status
	// (-1: none), Flags Envoy's response flags ("" none).
	Code, GRPCStatus int
	Flags            string
	// MTLS says the downstream connection was mutual TLS (the
	// destination reporter's connection_security_policy).
	MTLS bool
}

func orUnknown(s string) string {
	if s == "" {
		return Unknown
	}
	return s
}

// codes are the response_code strings of the status codes an HTTP
// response can have, made once so that labeling does not allocate.
var codes = func() (c [600]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

// grpcCodes are the grpc_response_status strings of gRPC's status codes.
var grpcCodes = func() (c [17]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

// AppendHTTP appends the values of HTTPLabels for e to dst.
func AppendHTTP(dst []string, e *Exchange) []string {
	dst = appendPeers(dst, e)
	code := "0"
	if e.Code > 0 && e.Code < len(codes) {
		code = codes[e.Code]
	}
	grpc := ""
	if e.GRPCStatus >= 0 {
		if e.GRPCStatus < len(grpcCodes) {
			grpc = grpcCodes[e.GRPCStatus]
		} else {
			grpc = strconv.Itoa(e.GRPCStatus)
		}
	}
	return append(dst, e.Protocol, code, grpc, flags(e.Flags), securityPolicy(e))
}

// AppendTCP appends the values of TCPLabels for e to dst.
func AppendTCP(dst []string, e *Exchange) []string {
	dst = appendPeers(dst, e)
	return append(dst, "tcp", flags(e.Flags), securityPolicy(e))
}

func flags(f string) string {
	if f == "" {
		return "-"
	}
	return f
}

// securityPolicy is connection_security_policy: what the destination saw
// of the downstream connection; the source reporter does not know what
// the server accepted and says unknown, as Istio does.
func securityPolicy(e *Exchange) string {
	if e.Reporter == Source {
		return Unknown
	}
	if e.MTLS {
		return "mutual_tls"
	}
	return "none"
}

func appendPeers(dst []string, e *Exchange) []string {
	src, dstW := &e.Peer, &e.Local
	srcP, dstP := e.PeerPrincipal, e.LocalPrincipal
	if e.Reporter == Source {
		src, dstW = &e.Local, &e.Peer
		srcP, dstP = e.LocalPrincipal, e.PeerPrincipal
	}
	return append(dst,
		e.Reporter.String(),
		orUnknown(src.Workload), orUnknown(src.CanonicalService), orUnknown(src.CanonicalRevision),
		orUnknown(src.Namespace), orUnknown(srcP), orUnknown(src.App), orUnknown(src.Version), orUnknown(src.Cluster),
		orUnknown(dstW.Workload), orUnknown(dstW.Namespace), orUnknown(dstP),
		orUnknown(dstW.App), orUnknown(dstW.Version), orUnknown(e.Service.Host),
		orUnknown(dstW.CanonicalService), orUnknown(dstW.CanonicalRevision),
		orUnknown(e.Service.Name), orUnknown(e.Service.Namespace), orUnknown(dstW.Cluster),
	)
}
