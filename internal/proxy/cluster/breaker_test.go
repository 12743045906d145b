package cluster

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func TestMaxRequestsOverflow(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(2)}}}
	})
	a, err1 := c.PickRequest(netip.AddrPort{}, 0, false)
	b, err2 := c.PickRequest(netip.AddrPort{}, 0, false)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := c.PickRequest(netip.AddrPort{}, 0, false); !errors.Is(err, ErrOverflow) {
		t.Fatalf("third request: %v, want ErrOverflow", err)
	}
	if got := c.Stats.Counter("upstream_rq_pending_overflow").Load(); got != 1 {
		t.Errorf("upstream_rq_pending_overflow = %d", got)
	}
	c.Finish(a)
	c.Finish(b)
	if _, err := c.PickRequest(netip.AddrPort{}, 0, false); err != nil {
		t.Fatalf("after Finish: %v", err)
	}
}

// max_connections 1, max_pending_requests 1 on a real upstream: the
// second request waits for the first's connection, the third overflows.
func TestConnectionLimitPending(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	c, err := build(&clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: assignment("c", port),
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(1)}}},
	}, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := c.Pick(netip.AddrPort{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := c.GetConn(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		uc, err := c.GetConn(ctx, ep)
		if err == nil {
			uc.Close()
		}
		got <- err
	}()
	// Wait until the second request is pending, then a third overflows.
	for c.breaker.pending.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.GetConn(ctx, ep); !errors.Is(err, ErrOverflow) {
		t.Fatalf("third request: %v, want ErrOverflow", err)
	}
	first.Close() // frees the slot: the pending request dials
	if err := <-got; err != nil {
		t.Fatalf("pending request: %v", err)
	}
	if c.Stats.Counter("upstream_cx_overflow").Load() < 2 || c.Stats.Counter("upstream_rq_pending_overflow").Load() != 1 {
		t.Errorf("cx_overflow %d, pending_overflow %d", c.Stats.Counter("upstream_cx_overflow").Load(), c.Stats.Counter("upstream_rq_pending_overflow").Load())
	}
}

func TestAcquireConnection(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: wrapperspb.UInt32(1), TrackRemaining: true}}}
	})
	if !c.AcquireConnection() {
		t.Fatal("first connection refused")
	}
	if c.AcquireConnection() {
		t.Fatal("second connection admitted over max_connections 1")
	}
	if got := c.Stats.Gauge("circuit_breakers.default.cx_open").Load(); got != 1 {
		t.Errorf("cx_open = %d while full", got)
	}
	if got := c.Stats.Gauge("circuit_breakers.default.remaining_cx").Load(); got != 0 {
		t.Errorf("remaining_cx = %d while full", got)
	}
	c.ReleaseConnection()
	if !c.AcquireConnection() {
		t.Fatal("refused after a release")
	}
	if got := c.Stats.Counter("upstream_cx_overflow").Load(); got != 1 {
		t.Errorf("upstream_cx_overflow = %d, want 1", got)
	}
}

// A built cluster holds no wake channel until a request waits; a signal
// wakes the waiters of the moment, and a later wait gets a new channel
// that the next signal closes.
func TestBreakerWakeMadeByWaiter(t *testing.T) {
	c := staticCluster(t, 1, nil)
	b := c.breaker
	if b.wake != nil {
		t.Fatal("a cluster nobody waited on holds a wake channel")
	}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	b.pending.Add(1)
	for round := range 2 {
		ch := b.waitCh()
		if ch == nil || closed(ch) || ch != b.waitCh() {
			t.Fatalf("round %d: waiters got %v and %v, want one open channel", round, ch, b.waitCh())
		}
		b.signal()
		if !closed(ch) {
			t.Fatalf("round %d: signal did not wake the waiter", round)
		}
	}
}
