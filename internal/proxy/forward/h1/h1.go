// Package h1 is the upstream exchange of a request read by the HTTP/1.1
// codec: writing its head (with the router's rewrites and mutations) and
// body on a pooled upstream connection, the router's attempts and retries,
// reading the response head and copying the body back (exchange.go), the
// same request sent to a cluster that speaks HTTP/2 (toh2.go), and an
// Upgrade turned into a byte tunnel (upgrade.go).
//
// The downstream connection (package hcm) parses the request, runs the
// HTTP filters and routes it; then it calls Exchange.Forward,
// Exchange.ForwardH2 or Exchange.ForwardUpgrade, and the exchange calls
// back through Downstream for what belongs to the connection: local
// replies, the filters' view of the response, the stream's timeouts.
// Package forward holds what every codec's exchange shares (failures,
// retry slots, RoundTrip); this package never imports hcm.
package h1

import (
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
)

// Downstream is what the exchange asks of the downstream connection.
// Only the connection's goroutine calls it.
type Downstream interface {
	// LocalReply answers the request without an upstream (discarding
	// its body to keep the connection when it can); WriteLocal writes a
	// local reply as is. Both report whether the connection can carry
	// another request.
	LocalReply(code int, flags, body string) bool
	WriteLocal(code int, flags, body string, keep bool) bool
	// UpstreamFailed answers a request that got no response head
	// (bodyConsumed: its body was read, or sent, whole).
	UpstreamFailed(cl *cluster.Cluster, ep cluster.Endpoint, f forward.Failure, err error, bodyConsumed bool) bool
	// ClientFailure maps an error reading the request body to a reply.
	ClientFailure(err error) forward.Failure
	// Closing reports whether the connection must close after this
	// request.
	Closing() bool
	// AppendResponseHead appends the downstream head of the response in
	// the exchange's Resp (the HTTP filters' encoders applied);
	// EncodeResponse and EncodeTrailers run the encoders on a response
	// from an HTTP/2 upstream.
	AppendResponseHead(w []byte, reqMinor int, keep bool) []byte
	EncodeResponse(status int, h http.Header)
	EncodeTrailers(t http.Header)
	// Abandon says that the connection closes without lingering (a
	// request body may still be being read).
	Abandon()
	// Scheme is the request's :scheme upstream.
	Scheme() string
}

// Exchange is the upstream side of the request in progress on one
// downstream HTTP/1.1 connection. It lives as long as the connection, and
// what it holds per request is reset by the connection between requests
// (Reset). Only the connection's goroutine touches it, except the request
// body copier (startBodyCopy), which owns R while it runs.
type Exchange struct {
	// Set once, with the connection.
	D        Downstream
	NC       *http1.DeadlineConn // the downstream connection
	R        *http1.Reader       // its reader
	Req      *http1.Request      // the request in progress, parsed by the connection
	Wbuf     *[]byte             // the connection's write buffer
	Rec      *accesslog.Record   // the access log record of the request in progress
	Log      *slog.Logger
	Dst      netip.AddrPort
	Src      cluster.OriginalSource // original_src; zero when absent
	Secure   bool                   // the listener terminated TLS
	Trailers *forward.Trailers      // which trailers cross
	// OverwriteXFP: the connection's x-forwarded-proto replaces the
	// client's.
	OverwriteXFP bool

	// Set per request by the connection before a Forward.
	Idle      time.Duration // the stream idle timeout (or the route's); 0: none
	RespBytes *atomic.Int64 // where streamed response body bytes are counted; nil: not counted
	Traced    bool          // record the upstream connection's identities in Rec
	LogAddrs  bool          // and its addresses (an access log reads them)

	Resp  http1.Response
	Chunk http1.ChunkedReader // the response body's decoder
	ReqCh http1.ChunkedReader // the request body's decoder

	// The route's mutations of the request in progress: fields added to
	// the request (ReqExtra) and the response (RespExtra), a host and a
	// path that replace the request's, a generated hash-policy cookie.
	ReqExtra, RespExtra        []http1.Header
	HostOverride, PathOverride []byte
	SetCookie                  string
	// Body is the request's whole body when the connection read it
	// before the exchange (for the HTTP filters that read bodies, hcm's
	// body.go): the request then has Content-Length framing of its
	// length and nothing of it is left on R. nil: the body, if any, is
	// still to be read from R.
	Body []byte
}

// Reset forgets the previous request's mutations.
func (x *Exchange) Reset() {
	x.ReqExtra = x.ReqExtra[:0]
	x.RespExtra = x.RespExtra[:0]
	x.HostOverride, x.PathOverride = nil, nil
	x.Body = nil
}

// logUpstream records the upstream connection's TLS identities (for
// istio.stats, through the stream's StreamInfo) and, when LogAddrs, its
// addresses (only the access log reads them).
func (x *Exchange) logUpstream(uc *cluster.UpstreamConn) {
	if !x.Traced {
		return
	}
	x.Rec.UpstreamPeerPrincipal, x.Rec.UpstreamLocalPrincipal = uc.PeerPrincipal, uc.LocalPrincipal
	if x.LogAddrs {
		x.Rec.UpstreamLocal, x.Rec.UpstreamRemote = accesslog.AddrPortOf(uc.LocalAddr()), accesslog.AddrPortOf(uc.RemoteAddr())
	}
}

// bodyFinishWait is how long a response waits for the request body copier
// before it gives up on keeping the downstream connection.
const bodyFinishWait = 50 * time.Millisecond

// clientPollInterval is how often a request waiting for its response head
// checks whether the client went away (a MSG_PEEK on the downstream
// socket), so that the upstream request is cancelled rather than left to
// the upstream's or a timeout's leisure.
const clientPollInterval = time.Second

// copyBufSize is the body streaming buffer (plus chunk framing room).
const copyBufSize = 32 << 10

var copyBufPool = sync.Pool{New: func() any {
	b := make([]byte, http1.ChunkHeadroom+copyBufSize+2)
	return &b
}}

// GetCopyBuf takes a body copy buffer from the pool.
func GetCopyBuf() *[]byte { return copyBufPool.Get().(*[]byte) }

// PutCopyBuf gives a buffer GetCopyBuf took back to the pool.
func PutCopyBuf(b *[]byte) { copyBufPool.Put(b) }
