package hcm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// This file is HTTP/1.1 Upgrade (WebSocket and the like) on the strait
// codec: when the HCM's upgrade_configs allow the requested protocol, the
// request goes to a new upstream connection with its Upgrade and
// Connection headers; a 101 answer turns both connections into a byte
// tunnel, anything else is relayed as a normal response and the
// connection closes.

// buildUpgrades reads upgrade_configs: the upgrade types allowed.
func (f *Filter) buildUpgrades(h *hcmv3.HttpConnectionManager) error {
	for i, u := range h.GetUpgradeConfigs() {
		typ := strings.ToLower(u.GetUpgradeType())
		if typ == "" {
			return fmt.Errorf("upgrade_configs[%d].upgrade_type is empty", i)
		}
		if typ == "connect" {
			return fmt.Errorf("upgrade_configs[%d]: upgrade_type CONNECT is not supported", i)
		}
		if typ == "h2c" {
			// Envoy's HTTP/1 codec never upgrades to h2c: it drops the
			// Upgrade and serves the request as HTTP/1.1, as we do
			// whatever upgrade_configs says. Accepting the entry would
			// tunnel what Envoy does not.
			return fmt.Errorf("upgrade_configs[%d]: upgrade_type h2c is not supported (an h2c upgrade request is served as HTTP/1.1; clients that want HTTP/2 use prior knowledge)", i)
		}
		if len(u.GetFilters()) > 0 {
			return fmt.Errorf("upgrade_configs[%d].filters is not supported (upgrades use the HCM's filters)", i)
		}
		if u.GetEnabled() != nil && !u.GetEnabled().GetValue() {
			continue
		}
		if f.upgrades == nil {
			f.upgrades = map[string]bool{}
		}
		f.upgrades[typ] = true
	}
	return nil
}

// upgradeAllowed reports whether the request asks for an upgrade that the
// filter allows (the first protocol of the Upgrade header, without its
// version, as Envoy compares it).
func (f *Filter) upgradeAllowed(req *http1.Request) bool {
	if !req.Upgrade || len(f.upgrades) == 0 {
		return false
	}
	v, ok := req.Headers.Get("Upgrade")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(string(v), ",")
	name, _, _ := strings.Cut(strings.TrimSpace(first), "/")
	return f.upgrades[strings.ToLower(name)]
}

// forwardUpgrade sends an upgrade request to ep on a new connection and,
// on 101, tunnels bytes both ways until the upstream side ends. The
// downstream connection never carries another request.
//
// The route's timeout bounds the exchange until the upgrade completes (the
// dial and the wait for the upstream's answer: 504 UT), and no longer: an
// upgraded stream is not cut by it, as in Envoy, whose router arms its
// response timeout when the downstream request ends
// (Router::Filter::onRequestComplete in source/common/router/router.cc),
// which an upgraded stream does not reach while its tunnel is open. The
// stream idle timeout (or the route's idle_timeout) ends the tunnel once
// no byte moved either way for that long.
func (c *h1conn) forwardUpgrade(cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route) bool {
	req := &c.req
	if req.Framing != http1.FramingNone {
		// A body would have to reach the upstream before the tunnel;
		// WebSocket handshakes have none.
		return c.localReply(400, "", "")
	}
	c.clock.routed(rt) // stream.go
	routeExpiry := http1.Deadline(rt.Timeout)
	ctx := context.Background()
	if !routeExpiry.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, routeExpiry)
		defer cancel()
	}
	uc, err := cl.DialConn(ctx, ep)
	if err != nil {
		if ctx.Err() != nil {
			return c.upstreamFailed(cl, ep, forward.FailRouteTimeout, err, true)
		}
		return c.upstreamFailed(cl, ep, forward.ConnectFailure(err), err, true)
	}
	c.logUpstream(uc) // accesslog.go
	uc.D.SetWriteTimeouts(c.clock.idle, routeExpiry)
	uc.D.SetReadTimeouts(c.clock.idle, routeExpiry)
	timedOut := func(err error) forward.Failure {
		if !http1.IsTimeout(err) {
			return forward.FailTerminated
		}
		if !routeExpiry.IsZero() && !time.Now().Before(routeExpiry) {
			return forward.FailRouteTimeout
		}
		return forward.FailStreamIdle
	}
	w := c.appendRequestHead(c.wbuf[:0], ep)
	w = w[:len(w)-2] // reopen the head: add the hop-by-hop fields of the upgrade
	w = append(w, "connection: upgrade\r\n"...)
	for i := range req.Headers {
		if h := &req.Headers[i]; http1.EqualFold(h.Name, "Upgrade") {
			w = http1.AppendHeader(w, h.Name, h.Value)
		}
	}
	w = append(w, "\r\n"...)
	c.wbuf = w
	if _, err := uc.Write(w); err != nil {
		uc.Close()
		return c.upstreamFailed(cl, ep, timedOut(err), err, true)
	}
	head, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes)
	if err != nil {
		uc.Close()
		return c.upstreamFailed(cl, ep, timedOut(err), err, true)
	}
	if err := http1.ParseResponse(head, &c.resp, false); err != nil {
		uc.Close()
		return c.upstreamFailed(cl, ep, forward.FailProtocol, err, true)
	}
	cl.Stats.AddResponse(c.resp.Status)
	cl.ReportStatus(ep, c.resp.Status)
	if c.resp.Status != 101 {
		// Refused: an ordinary response, after which both close.
		w = c.appendResponseHead(c.wbuf[:0], req.Minor, false)
		c.wbuf = w
		_, err = c.nc.Write(w)
		if err == nil && c.resp.Framing != http1.FramingNone {
			// Both connections close after this response, whether or not
			// its body got through.
			_ = c.copyResponseBody(uc, c.resp.Framing != http1.FramingLength && req.Minor == 1)
		}
		uc.Close()
		return false
	}
	// 101: the head as received (its Upgrade and Connection included),
	// then the tunnel.
	w = append(c.wbuf[:0], "HTTP/1.1 101 "...)
	w = append(w, c.resp.Reason...)
	w = append(w, "\r\n"...)
	for i := range c.resp.Headers {
		h := &c.resp.Headers[i]
		w = http1.AppendHeader(w, h.Name, h.Value)
	}
	w = append(w, "\r\n"...)
	c.wbuf = w
	if _, err := c.nc.Write(w); err != nil {
		uc.Close()
		return false
	}
	c.tunnel(uc)
	return false
}

// tunnel copies bytes both ways, each reader's buffered bytes first. The
// client's end of stream half-closes the upstream; the upstream's ends
// the tunnel. It ends both connections once no byte moved either way for
// the stream idle timeout.
func (c *h1conn) tunnel(uc *cluster.UpstreamConn) {
	// Timers rather than socket deadlines: the idle timeout counts both
	// directions together, as Envoy's stream idle timer does.
	c.nc.SetReadTimeouts(0, time.Time{})
	c.nc.SetWriteTimeouts(0, time.Time{})
	uc.D.SetReadTimeouts(0, time.Time{})
	uc.D.SetWriteTimeouts(0, time.Time{})
	end := func() { c.nc.Close(); uc.Conn.Close() }
	act := &activity{}
	if idle := c.clock.idle; idle > 0 {
		act.touch()
		var t *time.Timer
		t = time.AfterFunc(idle, func() {
			if quiet := time.Since(time.Unix(0, act.last.Load())); quiet < idle {
				t.Reset(idle - quiet)
				return
			}
			end()
		})
		defer t.Stop()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		bp := copyBufPool.Get().(*[]byte)
		defer copyBufPool.Put(bp)
		_, err := io.CopyBuffer(activeWriter{uc.Conn, act}, readerOnly{c.r}, *bp)
		if err == nil {
			if cw, ok := uc.Conn.(interface{ CloseWrite() error }); ok {
				// It fails only on a closed connection, which the other
				// direction's copy then ends on.
				_ = cw.CloseWrite()
				return
			}
		}
		uc.Conn.Close()
	}()
	bp := copyBufPool.Get().(*[]byte)
	_, err := io.CopyBuffer(activeWriter{c.nc, act}, readerOnly{uc.R}, *bp)
	copyBufPool.Put(bp)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.s.log.Debug("upgrade tunnel ended", "error", err)
	}
	// Unblock the other direction, then release the upstream's reader
	// once nothing reads it.
	c.nc.Close()
	uc.Conn.Close()
	wg.Wait()
	uc.Close()
}

// readerOnly hides a reader's WriteTo so CopyBuffer uses our buffer.
type readerOnly struct{ io.Reader }

// activity is when bytes last moved through a tunnel, either way.
type activity struct{ last atomic.Int64 } // unix nanoseconds

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// activeWriter records each write as activity (and, like writerOnly, hides
// the destination's ReadFrom so that CopyBuffer uses our buffer).
type activeWriter struct {
	w   io.Writer
	act *activity
}

func (a activeWriter) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	if n > 0 {
		a.act.touch()
	}
	return n, err
}
