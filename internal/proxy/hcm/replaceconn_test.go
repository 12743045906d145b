package hcm

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestReplacedConnCountedOnce: a GET whose reused upstream connection the
// upstream closes before answering is sent again on a new connection (the
// pool's replacement, cluster.ReplaceConn) and answered; the cluster
// counts it once in upstream_rq_total, as the request it is (it counted
// twice when the new connection was dialled as for another request), and
// the new connection in upstream_cx_total.
func TestReplacedConnCountedOnce(t *testing.T) {
	var mu sync.Mutex
	perConn := map[net.Conn]int{}
	be := newScriptBackend(t, func(b *beReq) bool {
		mu.Lock()
		perConn[b.c]++
		n := perConn[b.c]
		mu.Unlock()
		if n >= 2 && b.path == "/get-close" {
			return false // read it, then close without a byte
		}
		b.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	p := startProxy(t, CodecStrait, be.addr)
	cs := p.stats.Cluster("be")
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i, path := range []string{"/warm", "/get-close"} {
		_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: h\r\n\r\n") // a failed write shows in what the test reads back
		resp, body, err := readResp(c, br)
		if err != nil || resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d (%s): %v %q %v, want 200", i+1, path, resp, body, err)
		}
	}
	if n := be.count("/get-close"); n != 2 {
		t.Fatalf("the backend received the GET %d times, want 2 (sent again once, on a new connection)", n)
	}
	if got := cs.RqTotal.Load(); got != 2 {
		t.Errorf("upstream_rq_total = %d after two requests, want 2", got)
	}
	if got := cs.CxTotal.Load(); got != 2 {
		t.Errorf("upstream_cx_total = %d, want 2 (the pooled connection and its replacement)", got)
	}
}
