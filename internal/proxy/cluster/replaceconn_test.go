package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestReplaceConnCountsOnce: a request whose pooled connection turned out
// closed goes out on the connection ReplaceConn dials instead, counted
// once in upstream_rq_total (GetConn counted it) and in
// upstream_cx_total as the new connection it is; the old connection's
// max_connections slot is given back for it (one connection allowed), and
// without a free slot ReplaceConn fails with ErrOverflow.
func TestReplaceConnCountsOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	cfg := eds("c", "c", time.Second)
	cfg.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: wrapperspb.UInt32(1)}}}
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := Endpoint{Network: "tcp", Address: ln.Addr().String()}
	ctx := context.Background()

	first, err := c.GetConn(ctx, ep) // dialled: request 1
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	exchange(t, first, srv)
	c.PutConn(first)
	pooled, err := c.GetConn(ctx, ep) // from the pool: request 2
	if err != nil {
		t.Fatal(err)
	}
	if pooled != first || !pooled.Reused {
		t.Fatal("the idle connection was not reused")
	}
	srv.Close() // the upstream closed it; request 2 found out
	fresh, err := c.ReplaceConn(ctx, ep, pooled)
	if err != nil {
		t.Fatalf("ReplaceConn with the old connection's slot given back: %v", err)
	}
	defer fresh.Close()
	srv2 := <-accepted
	defer srv2.Close()
	exchange(t, fresh, srv2)
	if fresh == pooled || fresh.Reused {
		t.Error("ReplaceConn did not dial a new connection")
	}
	if got := c.Stats.RqTotal.Load(); got != 2 {
		t.Errorf("upstream_rq_total = %d after two requests, one of them on a replaced connection; want 2", got)
	}
	if got := c.Stats.CxTotal.Load(); got != 2 {
		t.Errorf("upstream_cx_total = %d, want 2 (the replacement is a connection)", got)
	}
	if got := c.Stats.Gauge("upstream_cx_active").Load(); got != 1 {
		t.Errorf("upstream_cx_active = %d, want 1 (the old one closed)", got)
	}

	// The one connection is open: a replacement of another (not holding
	// a slot: closed already) finds no room.
	other, err := c.DialConn(ctx, ep)
	if !errors.Is(err, ErrOverflow) {
		t.Fatalf("DialConn past max_connections: %v %v, want ErrOverflow", other, err)
	}
	if _, err := c.ReplaceConn(ctx, ep, pooled); !errors.Is(err, ErrOverflow) {
		t.Fatalf("ReplaceConn past max_connections: %v, want ErrOverflow", err)
	}
	if got := c.Stats.RqTotal.Load(); got != 2 {
		t.Errorf("upstream_rq_total = %d after refused replacements, want 2", got)
	}
}
