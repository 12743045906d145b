// Package tcpproxy is the envoy.filters.network.tcp_proxy network filter:
// it connects each downstream connection to an endpoint of a cluster and
// copies bytes both ways, propagating half-closes.
package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Name is the network filter name.
const Name = "envoy.filters.network.tcp_proxy"

// Clusters resolves cluster names (the cluster manager).
type Clusters interface {
	Get(name string) *cluster.Cluster
}

type weighted struct {
	name   string
	weight uint32
}

// Filter is one configured tcp_proxy. Immutable.
type Filter struct {
	StatPrefix string
	cluster    string
	weighted   []weighted
	total      uint32
	// IdleTimeout closes both connections when no byte moved either way
	// for this long (idle_timeout; Envoy's default 1 h, 0 disables it).
	IdleTimeout time.Duration
	// MaxConnectAttempts is how many upstream connects are tried, each to
	// an endpoint picked anew, before the connection is given up
	// (max_connect_attempts; Envoy's default 1).
	MaxConnectAttempts uint32
	// MaxDuration closes both connections this long after the downstream
	// one was accepted (max_downstream_connection_duration; 0: never).
	MaxDuration time.Duration
	// AccessLog gets one record per connection when it closes
	// (access_log, built by the listener with the proxy's files).
	AccessLog accesslog.Loggers
	// Istio is what Istio's network filters before this one add (the
	// metadata exchange and istio_tcp_* metrics, istio.go); nil: none.
	Istio *Istio
}

// defaultIdleTimeout is Envoy's tcp_proxy idle_timeout default.
const defaultIdleTimeout = time.Hour

// Build validates a TcpProxy config and returns the filter.
func Build(tp *tcpv3.TcpProxy) (*Filter, error) {
	f := &Filter{StatPrefix: tp.GetStatPrefix(), IdleTimeout: defaultIdleTimeout, MaxConnectAttempts: 1}
	if d := tp.GetIdleTimeout(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, fmt.Errorf("tcp_proxy.idle_timeout %v is not a valid duration (want >= 0s; 0s disables it)", d.AsDuration())
		}
		f.IdleTimeout = d.AsDuration()
	}
	if err := checkFields(tp); err != nil { // fields.go
		return nil, err
	}
	if v := tp.GetMaxConnectAttempts(); v != nil {
		if v.GetValue() < 1 {
			return nil, errors.New("tcp_proxy.max_connect_attempts is 0; want at least 1")
		}
		f.MaxConnectAttempts = v.GetValue()
	}
	if d := tp.GetMaxDownstreamConnectionDuration(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < time.Millisecond {
			return nil, fmt.Errorf("tcp_proxy.max_downstream_connection_duration %v is not a valid duration (want >= 1ms)", d.AsDuration())
		}
		f.MaxDuration = d.AsDuration()
	}
	switch cs := tp.GetClusterSpecifier().(type) {
	case *tcpv3.TcpProxy_Cluster:
		f.cluster = cs.Cluster
	case *tcpv3.TcpProxy_WeightedClusters:
		for i, c := range cs.WeightedClusters.GetClusters() {
			if err := fieldaudit.Only(fmt.Sprintf("tcp_proxy.weighted_clusters.clusters[%d]", i), c.ProtoReflect(), clusterWeightFields); err != nil {
				return nil, fmt.Errorf("%w (use a subset cluster)", err)
			}
			if c.GetWeight() == 0 {
				continue
			}
			f.weighted = append(f.weighted, weighted{c.GetName(), c.GetWeight()})
			f.total += c.GetWeight()
		}
		if f.total == 0 {
			return nil, fmt.Errorf("tcp_proxy.weighted_clusters: total weight is 0")
		}
	default:
		return nil, fmt.Errorf("tcp_proxy cluster specifier %T is not supported (want cluster or weighted_clusters)", cs)
	}
	return f, nil
}

func (f *Filter) pickCluster() string {
	if f.weighted == nil {
		return f.cluster
	}
	n := rand.Uint32N(f.total)
	for _, w := range f.weighted {
		if n < w.weight {
			return w.name
		}
		n -= w.weight
	}
	return f.weighted[len(f.weighted)-1].name
}

// Drain is the drain of the listener version a connection came in on.
type Drain struct {
	// Started is done once the drain starts (nil: never).
	Started context.Context
	// Time is how long a connection may go on once the drain started
	// (--drain-time-s): a TCP stream has no way to be asked to end, so, as
	// when Envoy removes a drained listener, it is closed then.
	Time time.Duration
}

// Serve proxies the downstream connection c until both directions are done.
// dst is the connection's (original) destination, used by ORIGINAL_DST
// clusters. src, when valid, is the source address (and mark) of the
// upstream connection (listener filter original_src). Serve closes c.
func (f *Filter) Serve(ctx context.Context, c net.Conn, dst netip.AddrPort, src cluster.OriginalSource, clusters Clusters, log *slog.Logger) {
	f.ServeDrain(ctx, c, dst, src, clusters, log, Drain{})
}

// ServeDrain is Serve for a connection that closes d.Time after d starts.
func (f *Filter) ServeDrain(ctx context.Context, c net.Conn, dst netip.AddrPort, src cluster.OriginalSource, clusters Clusters, log *slog.Logger, d Drain) {
	defer c.Close()
	accepted := time.Now()
	name := f.pickCluster()
	var flags string // Envoy's response flags, for the access log and istio.stats
	var rec *accesslog.Record
	if len(f.AccessLog) > 0 {
		conn := accesslog.ConnOf(c)
		rec = &accesslog.Record{Start: accepted, DownstreamLocal: dst, DownstreamRemote: conn.DirectRemote, Conn: conn}
		defer func() {
			rec.Duration = time.Since(accepted)
			f.AccessLog.Log(rec)
		}()
	}
	var report *tcpReport
	if f.Istio != nil && f.Istio.Stats != nil {
		report = newTCPReport(f.Istio, name, c) // istio.go
		defer func() { report.flush(true, flags) }()
	}
	flag := func(fl string) {
		flags = fl
		if rec != nil {
			rec.Flags = fl
		}
	}
	cl := clusters.Get(name)
	if cl == nil {
		log.Debug("tcp_proxy: unknown cluster", "cluster", name)
		flag("NC")
		return
	}
	if rec != nil {
		// The cluster is known (an unknown one, NC, logs none, as Envoy).
		rec.UpstreamCluster, rec.UpstreamStatName = name, cl.Stats.Name
	}
	if report != nil && cl.HasIstioService {
		report.setService(cl.IstioService) // istio.go
	}
	if !cl.AcquireConnection() {
		log.Debug("tcp_proxy: circuit breaker max_connections open", "cluster", name)
		flag("UO")
		return
	}
	defer cl.ReleaseConnection()
	var (
		up net.Conn
		ep cluster.Endpoint
	)
	for attempt := uint32(1); ; attempt++ {
		var err error
		ep, err = cl.Pick(dst)
		if err != nil {
			log.Debug("tcp_proxy: no upstream", "cluster", name, "error", err)
			flag("UH")
			return
		}
		ep.Source = src
		if cl.ProxyProtocol() {
			ep.Downstream = cluster.Downstream{Src: addrPort(c.RemoteAddr()), Dst: dst}
		}
		up, err = cl.Dial(ctx, ep)
		if err == nil {
			break
		}
		cl.ReportLocalFailure(ep, cluster.LocalConnectFailed) // outlier detection
		if attempt >= f.MaxConnectAttempts || ctx.Err() != nil {
			log.Debug("tcp_proxy: connect failed", "cluster", name, "attempts", attempt, "error", err)
			flag("UF")
			if rec != nil {
				rec.UpstreamHost = ep.Address
			}
			return
		}
		log.Debug("tcp_proxy: connect failed; trying again", "cluster", name, "attempt", attempt, "error", err)
	}
	cl.ReportConnectSuccess(ep)
	defer up.Close()
	if rec != nil {
		rec.UpstreamHost = ep.Address
		rec.UpstreamLocal, rec.UpstreamRemote = accesslog.AddrPortOf(up.LocalAddr()), accesslog.AddrPortOf(up.RemoteAddr())
	}
	closeBoth := func() { c.Close(); up.Close() }
	if f.MaxDuration > 0 {
		t := time.AfterFunc(f.MaxDuration-time.Since(accepted), closeBoth)
		defer t.Stop()
	}
	if d.Started != nil {
		var mu sync.Mutex // guards t and done
		var t *time.Timer
		done := false
		stop := context.AfterFunc(d.Started, func() { //nolint:contextcheck // d.Started is the listener's drain signal, not this connection's context
			mu.Lock()
			defer mu.Unlock()
			if !done {
				t = time.AfterFunc(d.Time, closeBoth)
			}
		})
		defer func() {
			stop()
			mu.Lock()
			done = true
			if t != nil {
				t.Stop()
			}
			mu.Unlock()
		}()
	}
	down, upc := f.istioConns(c, up, report) // istio.go
	if report != nil && f.Istio.ReportEvery > 0 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			report.every(f.Istio.ReportEvery, stop)
		}()
		defer func() { close(stop); wg.Wait() }()
	}
	received, sent := PipeIdle(down, upc, f.IdleTimeout)
	if rec != nil {
		rec.BytesReceived, rec.BytesSent = received, sent
	}
}

// LogDenied logs a connection that a network filter before tcp_proxy (the
// network RBAC filter) closed, accepted at start, with the filter's
// termination details: Envoy's tcp_proxy logs such a connection when it
// ends, without a cluster or upstream.
func (f *Filter) LogDenied(c net.Conn, dst netip.AddrPort, start time.Time, details string) {
	if len(f.AccessLog) == 0 {
		return
	}
	conn := accesslog.ConnOf(c)
	f.AccessLog.Log(&accesslog.Record{Start: start, Duration: time.Since(start), DownstreamLocal: dst,
		DownstreamRemote: conn.DirectRemote, Conn: conn, TerminationDetails: details})
}

// addrPort is a net.Addr's address and port (zero when it has none).
func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

type closeWriter interface{ CloseWrite() error }

// Pipe copies a<->b until both directions hit EOF or an error, half-closing
// the write side of each peer when its source ends.
func Pipe(a, b net.Conn) { PipeIdle(a, b, 0) }

// PipeIdle is Pipe that also ends both directions when no byte moved
// either way for idle (0: never). A direction that hits EOF half-closes
// its destination and ends; the other goes on until its own EOF, so a
// request-then-response exchange over a half-closed connection works.
// It returns the bytes copied from a to b and from b to a.
func PipeIdle(a, b net.Conn, idle time.Duration) (aToB, bToA int64) {
	var moved [2]int64 // per direction; each written by its own goroutine
	var wg sync.WaitGroup
	// quiet[i] is set when direction i ran a whole idle-long round without
	// moving a byte (or ended); progress either way clears both. Both set
	// means nothing moved for at least idle.
	var quiet [2]atomic.Bool
	wg.Add(2)
	cp := func(i int, dst, src net.Conn) {
		defer wg.Done()
		for {
			if idle > 0 {
				dl := time.Now().Add(idle)
				src.SetReadDeadline(dl)
				dst.SetWriteDeadline(dl)
			}
			n, err := io.Copy(dst, src)
			moved[i] += n
			if n > 0 {
				quiet[0].Store(false)
				quiet[1].Store(false)
			}
			if idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				if n > 0 {
					continue
				}
				quiet[i].Store(true)
				if !quiet[1-i].Load() {
					continue
				}
			}
			if cw, ok := dst.(closeWriter); ok && err == nil {
				quiet[i].Store(true)
				// A failed half-close shows as an error on the other
				// direction's copy, which then ends both.
				_ = cw.CloseWrite()
			} else {
				// An error (or the idle timeout) in one direction ends both.
				a.Close()
				b.Close()
			}
			return
		}
	}
	go cp(0, b, a)
	cp(1, a, b)
	wg.Wait()
	return moved[0], moved[1]
}
