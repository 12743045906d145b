package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// This file is HTTP/1.1 Upgrade (WebSocket and the like): when the HCM's
// upgrade_configs allow the requested protocol, the request goes to a new
// upstream connection with its Upgrade and Connection headers; a 101
// answer turns both connections into a byte tunnel, anything else is
// relayed as a normal response and the connection closes.

// ForwardUpgrade sends an upgrade request to ep on a new connection and,
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
func (x *Exchange) ForwardUpgrade(cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route) bool {
	req := x.Req
	if req.Framing != http1.FramingNone {
		// A body would have to reach the upstream before the tunnel;
		// WebSocket handshakes have none.
		return x.D.LocalReply(400, "", "")
	}
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
			return x.D.UpstreamFailed(cl, ep, forward.FailRouteTimeout, err, true)
		}
		return x.D.UpstreamFailed(cl, ep, forward.ConnectFailure(err), err, true)
	}
	x.logUpstream(uc)
	uc.D.SetWriteTimeouts(x.Idle, routeExpiry)
	uc.D.SetReadTimeouts(x.Idle, routeExpiry)
	timedOut := func(err error) forward.Failure {
		if !http1.IsTimeout(err) {
			return forward.FailTerminated
		}
		if !routeExpiry.IsZero() && !time.Now().Before(routeExpiry) {
			return forward.FailRouteTimeout
		}
		return forward.FailStreamIdle
	}
	w := x.appendRequestHead((*x.Wbuf)[:0], ep)
	w = w[:len(w)-2] // reopen the head: add the hop-by-hop fields of the upgrade
	w = append(w, "connection: upgrade\r\n"...)
	for i := range req.Headers {
		if h := &req.Headers[i]; http1.EqualFold(h.Name, "Upgrade") {
			w = http1.AppendHeader(w, h.Name, h.Value)
		}
	}
	w = append(w, "\r\n"...)
	*x.Wbuf = w
	if _, err := uc.Write(w); err != nil {
		uc.Close()
		return x.D.UpstreamFailed(cl, ep, timedOut(err), err, true)
	}
	head, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes)
	if err != nil {
		uc.Close()
		return x.D.UpstreamFailed(cl, ep, timedOut(err), err, true)
	}
	if err := http1.ParseResponse(head, &x.Resp, false); err != nil {
		uc.Close()
		return x.D.UpstreamFailed(cl, ep, forward.FailProtocol, err, true)
	}
	cl.Stats.AddResponse(x.Resp.Status)
	cl.ReportStatus(ep, x.Resp.Status)
	if x.Resp.Status != 101 {
		// Refused: an ordinary response, after which both close.
		w = x.D.AppendResponseHead((*x.Wbuf)[:0], req.Minor, false)
		*x.Wbuf = w
		_, err = x.NC.Write(w)
		if err == nil && x.Resp.Framing != http1.FramingNone {
			// Both connections close after this response, whether or not
			// its body got through.
			_ = x.copyResponseBody(uc, x.Resp.Framing != http1.FramingLength && req.Minor == 1)
		}
		uc.Close()
		return false
	}
	// 101: the head as received (its Upgrade and Connection included),
	// then the tunnel.
	w = append((*x.Wbuf)[:0], "HTTP/1.1 101 "...)
	w = append(w, x.Resp.Reason...)
	w = append(w, "\r\n"...)
	for i := range x.Resp.Headers {
		h := &x.Resp.Headers[i]
		w = http1.AppendHeader(w, h.Name, h.Value)
	}
	w = append(w, "\r\n"...)
	*x.Wbuf = w
	if _, err := x.NC.Write(w); err != nil {
		uc.Close()
		return false
	}
	x.tunnel(uc)
	return false
}

// tunnel copies bytes both ways, each reader's buffered bytes first. The
// client's end of stream half-closes the upstream; the upstream's ends
// the tunnel. It ends both connections once no byte moved either way for
// the stream idle timeout.
func (x *Exchange) tunnel(uc *cluster.UpstreamConn) {
	// Timers rather than socket deadlines: the idle timeout counts both
	// directions together, as Envoy's stream idle timer does.
	x.NC.SetReadTimeouts(0, time.Time{})
	x.NC.SetWriteTimeouts(0, time.Time{})
	uc.D.SetReadTimeouts(0, time.Time{})
	uc.D.SetWriteTimeouts(0, time.Time{})
	end := func() { x.NC.Close(); uc.Conn.Close() }
	act := &activity{}
	if idle := x.Idle; idle > 0 {
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
		bp := GetCopyBuf()
		defer PutCopyBuf(bp)
		_, err := io.CopyBuffer(activeWriter{uc.Conn, act}, readerOnly{x.R}, *bp)
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
	bp := GetCopyBuf()
	_, err := io.CopyBuffer(activeWriter{x.NC, act}, readerOnly{uc.R}, *bp)
	PutCopyBuf(bp)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		x.Log.Debug("upgrade tunnel ended", "error", err)
	}
	// Unblock the other direction, then release the upstream's reader
	// once nothing reads it.
	x.NC.Close()
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
