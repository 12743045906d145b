package xds

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/proxypush"
)

// Connection is one ADS stream from one proxy: what both protocols share
// (the proxy, the subscriptions, ACK bookkeeping, the push hand-over). What
// only one protocol needs lives in that protocol's stream type (sotwStream,
// deltaStream), which the connection reaches through protocol.
type Connection struct {
	// Set before the connection is registered in the server's table, and
	// read-only afterwards.
	id          string
	peer        string
	connectedAt time.Time
	proxy       *proxypush.Proxy
	// protocol sends the pushes of this stream: a *sotwStream or a
	// *deltaStream. Only the processing loop calls it.
	protocol protocolStream

	// recvErr is the receive goroutine's error, set before it closes the
	// protocol's request channel.
	recvErr error
	// pushCh carries pushes from the push workers to the processing loop.
	pushCh chan *pushEvent
	// stop is closed when the stream handler returns.
	stop chan struct{}

	// mu guards watched. Only the processing loop writes it; the debug
	// handlers read it.
	mu      sync.RWMutex
	watched map[string]*WatchedResource
	// Convergence tracking, guarded by mu: the nonces of pushes caused by a
	// mesh change that the proxy has not answered yet, and when the oldest
	// change not yet converged happened.
	unacked       map[string]struct{}
	unackedFailed bool
	convergeStart time.Time
}

// protocolStream is what the shared stream lifecycle needs of one
// protocol: sending one type of a server-initiated push. Both
// implementations are owned by the connection's processing loop.
type protocolStream interface {
	// push generates typeURL for the connection's proxy and sends what the
	// proxy does not hold yet; it sends nothing when nothing changed. Only
	// a send error is returned (it ends the stream).
	push(typeURL string, req *proxypush.PushRequest, version string) error
	// delta reports whether the stream speaks delta xDS.
	delta() bool
}

// awaitAck records a response sent for req, so that its ACK can be timed
// (pilot_proxy_convergence_time: from the config change to the proxy's
// ACK of everything that change caused). Answers to the proxy's own
// requests are not timed. c.mu must be held.
func (c *Connection) awaitAck(nonce string, req *proxypush.PushRequest) {
	if req == nil || req.Start.IsZero() || isProxyRequestOnly(req) {
		return
	}
	if c.unacked == nil {
		c.unacked = map[string]struct{}{}
	}
	c.unacked[nonce] = struct{}{}
	if c.convergeStart.IsZero() || req.Start.Before(c.convergeStart) {
		c.convergeStart = req.Start
	}
}

// acked records the proxy's answer to nonce. When every response of the
// pending change is answered, an ACK observes the convergence time; a NACK
// means the proxy did not converge, so nothing is observed. c.mu must be
// held.
func (c *Connection) acked(nonce string, ok bool, m *metrics) {
	if _, pending := c.unacked[nonce]; !pending {
		return
	}
	delete(c.unacked, nonce)
	if !ok {
		c.unackedFailed = true
	}
	if len(c.unacked) > 0 {
		return
	}
	if !c.unackedFailed {
		m.convergenceTime.Observe(time.Since(c.convergeStart).Seconds())
	}
	c.convergeStart, c.unackedFailed = time.Time{}, false
}

func isProxyRequestOnly(req *proxypush.PushRequest) bool {
	for _, r := range req.Reason {
		if r != proxypush.ProxyRequest {
			return false
		}
	}
	return true
}

// pushEvent is one push handed to a connection; the processing loop closes
// done when it has been sent.
type pushEvent struct {
	req  *proxypush.PushRequest
	done chan struct{}
}

// WatchedResource is a connection's subscription to one type URL and where
// the last response for it stands, as both protocols record it. What a
// protocol remembers of the resources it sent is its own (sotwSent,
// deltaHeld).
type WatchedResource struct {
	TypeURL string
	// ResourceNames is the subscription's resource_names, sorted. For state
	// of the world an empty list is the wildcard; for delta it is the
	// names subscribed explicitly, next to Wildcard.
	ResourceNames []string
	// Wildcard is set for a delta subscription to every resource of the
	// type (an empty first subscribe list, or "*"); always false for state
	// of the world, where an empty ResourceNames says the same.
	Wildcard bool

	VersionSent string
	NonceSent   string
	LastSent    time.Time

	VersionAcked string
	NonceAcked   string

	// NackError is the error_detail of the last NACK of the current nonce;
	// an ACK clears it.
	NackError   string
	NonceNacked string
	LastNack    time.Time
}

func newConnection(peer string) *Connection {
	return &Connection{
		peer:        peer,
		connectedAt: time.Now(),
		pushCh:      make(chan *pushEvent),
		stop:        make(chan struct{}),
		watched:     make(map[string]*WatchedResource),
	}
}

// IsDelta reports whether the connection speaks delta xDS.
func (c *Connection) IsDelta() bool { return c.protocol.delta() }

// ID is the connection id: the proxy id and a per-server counter.
func (c *Connection) ID() string { return c.id }

// Proxy is the connected proxy; it must not be modified.
func (c *Connection) Proxy() *proxypush.Proxy { return c.proxy }

// Watched returns copies of the connection's subscriptions.
func (c *Connection) Watched() []WatchedResource {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]WatchedResource, 0, len(c.watched))
	for _, w := range c.watched {
		cp := *w
		cp.ResourceNames = slices.Clone(w.ResourceNames)
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b WatchedResource) int { return typeRank(a.TypeURL) - typeRank(b.TypeURL) })
	return out
}

// watchedTypes returns the subscribed type URLs in push order: CDS, EDS,
// LDS, RDS, then any other type sorted. Only the processing loop calls it.
func (c *Connection) watchedTypes() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for _, t := range pushOrder {
		if _, ok := c.watched[t]; ok {
			out = append(out, t)
		}
	}
	var other []string
	for t := range c.watched {
		if typeRank(t) == len(pushOrder) {
			other = append(other, t)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}

// typeRank is a type URL's place in pushOrder, len(pushOrder) if absent.
func typeRank(typeURL string) int {
	if i := slices.Index(pushOrder, typeURL); i >= 0 {
		return i
	}
	return len(pushOrder)
}

// nodeMetadata flattens node metadata to strings: string values as they
// are, other values as JSON.
func nodeMetadata(node *core.Node) map[string]string {
	fields := node.GetMetadata().GetFields()
	if len(fields) == 0 {
		return nil
	}
	md := make(map[string]string, len(fields))
	for k, v := range fields {
		switch x := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			md[k] = x.StringValue
		case *structpb.Value_BoolValue:
			md[k] = strconv.FormatBool(x.BoolValue)
		case *structpb.Value_NumberValue:
			md[k] = strconv.FormatFloat(x.NumberValue, 'f', -1, 64)
		default:
			b, err := json.Marshal(v.AsInterface())
			if err == nil {
				md[k] = string(b)
			}
		}
	}
	return md
}

// localityString is node.locality as "region/zone/subzone" (Istio's
// LocalityToString): trailing empty parts are left out; "" when unset.
func localityString(l *core.Locality) string {
	switch {
	case l.GetSubZone() != "":
		return l.GetRegion() + "/" + l.GetZone() + "/" + l.GetSubZone()
	case l.GetZone() != "":
		return l.GetRegion() + "/" + l.GetZone()
	}
	return l.GetRegion()
}
