package xds

import (
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestFindConnectionPrefersProxyStream: a debug lookup by node id returns
// the proxy's own stream, not the agent's newer NDS-only stream of the
// same node; the NDS stream only when it is the node's only one.
func TestFindConnectionPrefersProxyStream(t *testing.T) {
	const node = "sidecar~10.1.0.2~app-1.demo~demo.svc.cluster.local"
	s := &Server{clients: map[string]*Connection{}}
	conn := func(id string, at time.Time, types ...string) *Connection {
		c := newConnection("peer")
		c.id, c.connectedAt, c.proxy = id, at, &proxypush.Proxy{ID: node}
		for _, typ := range types {
			c.watched[typ] = &WatchedResource{TypeURL: typ}
		}
		s.clients[id] = c
		return c
	}
	t0 := time.Now()
	agent := conn("agent", t0.Add(2*time.Second), nds.TypeURL)
	if got := s.findConnection(node); got != agent {
		t.Errorf("only the NDS stream: got %v", got)
	}
	proxy := conn("proxy", t0, xdsapi.ClusterType, xdsapi.ListenerType)
	if got := s.findConnection(node); got != proxy {
		t.Errorf("got %s, want the proxy's stream", got.id)
	}
	newer := conn("proxy-2", t0.Add(time.Second), xdsapi.ClusterType)
	if got := s.findConnection(node); got != newer {
		t.Errorf("got %s, want the newest proxy stream", got.id)
	}
	if got := s.findConnection("agent"); got != agent {
		t.Errorf("by connection id: got %v", got)
	}
}
