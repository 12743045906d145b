package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/proxy/cluster/proxyheader"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// SetSecrets gives the manager the SDS provider that clusters with a TLS
// transport socket take their secrets from. Call it before any cluster is
// added; without it, a cluster whose TLS context names an SDS secret is
// refused.
func (m *Manager) SetSecrets(p *tlsconf.Provider) { m.secrets = p }

// build builds c with its transport socket; wire is c in its
// deterministic wire form (configWire), which the cluster keeps.
func (m *Manager) build(c *clusterv3.Cluster, wire []byte) (*Cluster, error) {
	out, err := build(c, m.stats, m.log)
	if err != nil {
		return nil, err
	}
	out.config = wire
	out.h1.watch = m.watch
	exchange, err := parseUpstreamFilters(c) // filters.go
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	if exchange {
		out.exchangeFrame = m.exchangeFrame
		if out.exchangeFrame == nil {
			out.exchangeFrame = peermeta.UnknownFrame()
		}
	}
	// Istio wraps the cluster's socket, or every one of its matches, in
	// the same upstream_proxy_protocol socket; a cluster whose sockets
	// disagree is refused.
	ts, pp, err := proxyheader.Unwrap("transport_socket", c.GetTransportSocket())
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	cl, err := tlsconf.NewClient(ts, m.secrets)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	out.tls = cl
	out.proxyProto = pp
	for i, tm := range c.GetTransportSocketMatches() {
		f := fmt.Sprintf("transport_socket_matches[%d].transport_socket", i)
		ts, mpp, err := proxyheader.Unwrap(f, tm.GetTransportSocket())
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		if i == 0 && c.GetTransportSocket() == nil {
			out.proxyProto = mpp
		}
		if mpp != out.proxyProto {
			return nil, fmt.Errorf("cluster %q: %s: a PROXY protocol socket on some transport sockets and not on others is not supported", c.GetName(), f)
		}
		sm := socketMatch{want: map[string]string{}}
		for k, v := range tm.GetMatch().GetFields() {
			sm.want[k] = matchValue(v)
		}
		if sm.tls, err = tlsconf.NewClient(ts, m.secrets); err != nil {
			return nil, fmt.Errorf("cluster %q: transport_socket_matches[%d] %q: %w", c.GetName(), i, tm.GetName(), err)
		}
		out.socketMatches = append(out.socketMatches, sm)
	}
	return out, nil
}

// secure runs the cluster's TLS handshake on a new upstream connection
// (none for a plaintext cluster), bounded by the connect timeout, and
// counts it (cluster.<name>.ssl.*).
func (c *Cluster) secure(ctx context.Context, ep Endpoint, conn net.Conn) (net.Conn, error) {
	sock := c.socketFor(ep)
	if sock == nil {
		return conn, nil
	}
	parent := ctx
	if c.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.connectTimeout)
		defer cancel()
	}
	tc, err := sock.Handshake(ctx, conn)
	if err != nil {
		c.Stats.SSL.ConnectionError.Add(1)
		c.connectFailed(parent, err)
		return nil, &TransportError{Cluster: c.Name, Addr: conn.RemoteAddr().String(), Err: err}
	}
	c.Stats.SSL.Handshake.Add(1)
	return tc, nil
}

// TransportError is an upstream connection that failed in its transport
// socket (the TLS handshake): the access log's
// %UPSTREAM_TRANSPORT_FAILURE_REASON% is Err's text.
type TransportError struct {
	Cluster, Addr string
	Err           error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("cluster %s: tls handshake with %s: %v", e.Cluster, e.Addr, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// TransportFailureReason is the transport socket's reason when err is
// (or wraps) a TransportError; empty otherwise.
func TransportFailureReason(err error) string {
	var te *TransportError
	if errors.As(err, &te) && te.Err != nil {
		return te.Err.Error()
	}
	return ""
}

// transportSocketMatchKey is the endpoint metadata namespace that
// transport_socket_matches read (Istio puts {tlsMode: istio} there for
// endpoints with a sidecar).
const transportSocketMatchKey = "envoy.transport_socket_match"

// socketMatch is one transport_socket_matches entry: endpoints whose
// metadata has every key of want with an equal value (matchValue) use tls
// (nil: plaintext).
type socketMatch struct {
	want map[string]string
	tls  *tlsconf.Client
}

// transportMatchOf renders the envoy.transport_socket_match filter
// metadata of an endpoint or a locality canonically (sorted key=value
// lines, values as matchValue renders them), so that Endpoint stays
// comparable; "" when there is none.
func transportMatchOf(md *corev3.Metadata) string {
	fields := md.GetFilterMetadata()[transportSocketMatchKey].GetFields()
	if len(fields) == 0 {
		return ""
	}
	var kv []string
	for k, v := range fields {
		kv = append(kv, k+"="+matchValue(v))
	}
	slices.Sort(kv)
	return strings.Join(kv, "\n")
}

// matchValue renders a metadata value so that two render alike only when
// Envoy's ValueUtil::equal holds: a string is not the number it spells.
// Values are one line (a key=value line each in transportMatchOf).
func matchValue(v *structpb.Value) string {
	if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		return "s" + strconv.Quote(s.StringValue)
	}
	b, _ := protojson.MarshalOptions{Multiline: false}.Marshal(v)
	return "j" + string(b)
}

// socketFor chooses the transport socket of a connection to ep as Envoy's
// TransportSocketMatcherImpl::resolve does: the first
// transport_socket_matches entry whose match is a subset of the
// endpoint's envoy.transport_socket_match metadata (an empty match takes
// any endpoint), else the first that is a subset of its locality's, else
// the cluster's transport_socket (nil: plaintext). Pools dial by address,
// so an endpoint without metadata is looked up among the current
// endpoints.
func (c *Cluster) socketFor(ep Endpoint) *tlsconf.Client {
	if len(c.socketMatches) == 0 {
		return c.tls
	}
	if s := c.hosts.Load(); s != nil && ep.transportMatch == "" && ep.localityMatch == "" {
		for _, h := range s.hosts {
			if h.ep.Address == ep.Address {
				ep.transportMatch, ep.localityMatch = h.ep.transportMatch, h.ep.localityMatch
				break
			}
		}
	}
	for _, meta := range []string{ep.transportMatch, ep.localityMatch} {
		have := map[string]string{}
		for _, line := range strings.Split(meta, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				have[k] = v
			}
		}
		for _, sm := range c.socketMatches {
			if matchesAll(sm.want, have) {
				return sm.tls
			}
		}
	}
	return c.tls
}

// matchesAll reports whether have holds every key of want with its value.
func matchesAll(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// ProxyProtocol reports whether the cluster writes a PROXY protocol
// header on its upstream connections: callers then set Endpoint.Downstream.
func (c *Cluster) ProxyProtocol() bool { return c.proxyProto != proxyheader.None }

// writeProxyHeader sends the cluster's PROXY header for d on a new
// connection, before any other byte (and before TLS).
func (c *Cluster) writeProxyHeader(w io.Writer, d Downstream) error {
	if c.proxyProto == proxyheader.None {
		return nil
	}
	if _, err := w.Write(proxyheader.Header(c.proxyProto, d.Src, d.Dst)); err != nil {
		return fmt.Errorf("cluster %s: write PROXY protocol header: %w", c.Name, err)
	}
	return nil
}
