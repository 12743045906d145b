package cluster

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func withHTTPOptions(o *corev3.HttpProtocolOptions) *clusterv3.Cluster {
	a, _ := anypb.New(&upstreamhttpv3.HttpProtocolOptions{CommonHttpProtocolOptions: o})
	c := eds("c", "c", time.Second)
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsKey: a}
	return c
}

func TestH1PoolOptions(t *testing.T) {
	c, err := build(eds("c", "c", time.Second), stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.h1.idleTimeout != 3600 || c.h1.maxRequests != 0 {
		t.Errorf("defaults: idle %ds max %d, want Envoy's 1 h and no limit", c.h1.idleTimeout, c.h1.maxRequests)
	}
	c, err = build(withHTTPOptions(&corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(90 * time.Second),
		MaxRequestsPerConnection: wrapperspb.UInt32(3)}), stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.h1.idleTimeout != 90 || c.h1.maxRequests != 3 {
		t.Errorf("idle %ds max %d, want 90 s and 3", c.h1.idleTimeout, c.h1.maxRequests)
	}
	_, err = build(withHTTPOptions(&corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(time.Second)}), stats.New(), nil)
	if err == nil || !strings.Contains(err.Error(), "max_stream_duration") {
		t.Errorf("max_stream_duration: got %v, want it refused by name", err)
	}
}

// TestIdlePooledConnWatched: anything the upstream sends on an idle pooled
// connection (bytes or a close) retires it; the next request gets a fresh
// connection.
func TestIdlePooledConnWatched(t *testing.T) {
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
	c, err := build(eds("c", "c", time.Second), stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := Endpoint{Network: "tcp", Address: ln.Addr().String()}
	for _, late := range []func(net.Conn){
		func(s net.Conn) { _, _ = s.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPWNED!")) },
		func(s net.Conn) { s.Close() },
	} {
		uc, err := c.DialConn(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		srv := <-accepted
		c.PutConn(uc) // clean: nothing buffered
		late(srv)     // after the put
		time.Sleep(50 * time.Millisecond)
		got, err := c.GetConn(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		if got == uc || got.Reused {
			t.Fatal("a pooled connection that heard from the upstream while idle was reused")
		}
		<-accepted
		got.Close()
		srv.Close()
	}
	// A quiet one is reused.
	uc, _ := c.DialConn(context.Background(), ep)
	<-accepted
	c.PutConn(uc)
	if got, _ := c.GetConn(context.Background(), ep); got != uc || !got.Reused {
		t.Fatal("a quiet idle connection was not reused")
	}
	uc.Close()
}

// TestCloseOneIdleSkipsEmptyLists: get keeps an endpoint's key when it
// takes the last idle connection; closeOneIdle (a request waiting for a
// connection slot) must pass over such a key, to another endpoint's idle
// connection or to nothing, instead of indexing the empty list.
func TestCloseOneIdleSkipsEmptyLists(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	p := &h1Pool{idle: map[string][]*UpstreamConn{"10.0.0.1:80": {}}}
	if p.closeOneIdle() {
		t.Fatal("closeOneIdle closed something in a pool with no idle connection")
	}
	uc := &UpstreamConn{Conn: a, addr: "10.0.0.2:80"}
	p.idle["10.0.0.2:80"] = []*UpstreamConn{uc}
	p.idleSrc = map[srcKey][]*UpstreamConn{{addr: "10.0.0.3:80"}: {}}
	if !p.closeOneIdle() {
		t.Fatal("closeOneIdle passed over the idle connection of 10.0.0.2:80")
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Error("the idle connection is still open")
	}
	if p.closeOneIdle() {
		t.Error("closeOneIdle closed something once the pool was empty")
	}
}
