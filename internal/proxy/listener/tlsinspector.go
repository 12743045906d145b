package listener

// The envoy.filters.listener.tls_inspector listener filter: it reads the
// start of a connection without consuming it, and when that is a TLS
// ClientHello, takes its SNI (server name), ALPN protocols and the
// transport protocol "tls" for filter chain matching (server_names,
// transport_protocol, application_protocols), as
// Envoy's tls_inspector does (source/extensions/filters/listener/
// tls_inspector). TLS is not terminated: the bytes read are replayed to
// the chain's network filter.

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/http1"
)

const (
	tlsInspectorFilter = "envoy.filters.listener.tls_inspector"
	tlsInspectorType   = "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"

	// maxClientHello bounds what the inspector reads (Envoy's
	// tls_inspector max_client_hello_size, 64 KiB).
	maxClientHello = 64 << 10
	// defaultListenerFiltersTimeout is Envoy's listener_filters_timeout.
	defaultListenerFiltersTimeout = 15 * time.Second
)

// Transport protocols the inspector reports (filter_chain_match
// transport_protocol).
const (
	transportTLS = "tls"
	transportRaw = "raw_buffer"
)

// buildTLSInspector validates a tls_inspector listener filter config.
func buildTLSInspector(lf *listenerv3.ListenerFilter) error {
	tc := lf.GetTypedConfig()
	if tc == nil {
		if lf.GetConfigType() != nil {
			return fmt.Errorf("listener filter %q: only typed_config is supported", lf.GetName())
		}
		return nil
	}
	if tc.GetTypeUrl() != tlsInspectorType {
		return fmt.Errorf("listener filter %q: typed_config is %q, want %q", lf.GetName(), tc.GetTypeUrl(), tlsInspectorType)
	}
	var cfg tlsinspectorv3.TlsInspector
	if err := tc.UnmarshalTo(&cfg); err != nil {
		return fmt.Errorf("listener filter %q: typed_config: %w", lf.GetName(), err)
	}
	if err := fieldaudit.Check("tls_inspector", cfg.ProtoReflect(), tlsInspectorHonoured, tlsInspectorRefused); err != nil {
		return fmt.Errorf("listener filter %q: %w", lf.GetName(), err)
	}
	switch {
	case cfg.GetEnableJa3Fingerprinting().GetValue():
		return fmt.Errorf("listener filter %q: enable_ja3_fingerprinting is not supported (remove it)", lf.GetName())
	case cfg.GetEnableJa4Fingerprinting().GetValue():
		return fmt.Errorf("listener filter %q: enable_ja4_fingerprinting is not supported (remove it)", lf.GetName())
	case cfg.GetMaxClientHelloSize() != nil && cfg.GetMaxClientHelloSize().GetValue() != maxClientHello:
		return fmt.Errorf("listener filter %q: max_client_hello_size %d is not supported (the inspector reads up to %d bytes; remove it)", lf.GetName(), cfg.GetMaxClientHelloSize().GetValue(), maxClientHello)
	}
	return nil
}

// inspection is what the inspector learned about a connection.
type inspection struct {
	sni       string
	transport string   // transportTLS or transportRaw
	alpn      []string // the ClientHello's ALPN protocols
}

// errStopHandshake ends the handshake once the ClientHello is read.
var errStopHandshake = errors.New("client hello read")

// inspectTLS reads c's first bytes, under timeout (0: none), and returns
// a connection that replays them, with what they say. When the timeout
// expires first, ok is false unless continueOnTimeout.
func inspectTLS(c net.Conn, timeout time.Duration, continueOnTimeout bool) (net.Conn, inspection, bool) {
	in := inspection{transport: transportRaw}
	if timeout > 0 {
		c.SetReadDeadline(time.Now().Add(timeout))
		defer c.SetReadDeadline(time.Time{})
	}
	rec := &recordingReader{r: io.LimitReader(c, maxClientHello)}
	first := make([]byte, 1)
	if _, err := io.ReadFull(rec, first); err != nil {
		return replayConn(c, rec.buf.Bytes()), in, isTimeout(err) && continueOnTimeout
	}
	if first[0] != 0x16 { // not a TLS handshake record
		return replayConn(c, rec.buf.Bytes()), in, true
	}
	var sni string
	var alpn []string
	var sawHello bool
	hs := tls.Server(&helloConn{r: io.MultiReader(bytes.NewReader(first), rec), c: c}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, alpn, sawHello = h.ServerName, h.SupportedProtos, true
			return nil, errStopHandshake
		},
	})
	err := hs.Handshake()
	out := replayConn(c, rec.buf.Bytes())
	if sawHello {
		in.sni, in.transport, in.alpn = sni, transportTLS, alpn
		if pc, ok := out.(*prefixedConn); ok {
			pc.sni = sni // for the access log's %REQUESTED_SERVER_NAME%
		}
		return out, in, true
	}
	// Not a ClientHello after all (Envoy then reports no TLS), or the
	// timeout expired before it was complete.
	return out, in, !isTimeout(err) || continueOnTimeout
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// recordingReader keeps every byte read through it.
type recordingReader struct {
	r   io.Reader
	buf bytes.Buffer
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

// helloConn feeds crypto/tls the recorded bytes and refuses writes: the
// handshake stops at the ClientHello and never answers the client.
type helloConn struct {
	r io.Reader
	c net.Conn
}

func (h *helloConn) Read(p []byte) (int, error)         { return h.r.Read(p) }
func (h *helloConn) Write(p []byte) (int, error)        { return 0, errStopHandshake }
func (h *helloConn) Close() error                       { return nil }
func (h *helloConn) LocalAddr() net.Addr                { return h.c.LocalAddr() }
func (h *helloConn) RemoteAddr() net.Addr               { return h.c.RemoteAddr() }
func (h *helloConn) SetDeadline(t time.Time) error      { return nil }
func (h *helloConn) SetReadDeadline(t time.Time) error  { return nil }
func (h *helloConn) SetWriteDeadline(t time.Time) error { return nil }

// replayConn returns c with pre read first.
func replayConn(c net.Conn, pre []byte) net.Conn {
	if len(pre) == 0 {
		return c
	}
	return &prefixedConn{Conn: c, pre: bytes.Clone(pre)}
}

type prefixedConn struct {
	net.Conn
	pre []byte
	sni string // the ClientHello's server name; empty when none was read
}

// RequestedServerName is the SNI the inspector read (accesslog.ServerNamer:
// TLS passed through keeps it for the access log).
func (p *prefixedConn) RequestedServerName() string { return p.sni }

func (p *prefixedConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// Buffered and NetConn make prefixedConn an http1.BufferedConn, so that
// the HTTP/1.1 path can still peek at the socket under it.
func (p *prefixedConn) Buffered() int { return len(p.pre) }

// NetConn returns the wrapped connection.
func (p *prefixedConn) NetConn() net.Conn { return p.Conn }

// CloseWrite half-closes the underlying connection when it can (tcp_proxy
// propagates half-closes).
func (p *prefixedConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return p.Conn.Close()
}

var (
	_ http1.BufferedConn    = (*prefixedConn)(nil)
	_ accesslog.ServerNamer = (*prefixedConn)(nil)
)
