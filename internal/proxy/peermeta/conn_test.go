package peermeta

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// pair is a connected loopback TCP pair.
func pair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-done
	t.Cleanup(func() { a.Close(); b.Close() })
	a.SetDeadline(time.Now().Add(5 * time.Second))
	b.SetDeadline(time.Now().Add(5 * time.Second))
	return a, b
}

// Both sides wrapped: each gets the other's workload and only the
// application's bytes; the server answers with its frame before its
// first byte.
func TestConnExchange(t *testing.T) {
	a, b := pair(t)
	cf, _ := AppendExchange(nil, "client", productpage)
	sf, _ := AppendExchange(nil, "server", Workload{Workload: "ratings-v1", Namespace: "default"})
	client, server := NewConn(a, cf), NewConn(b, sf)
	var gotC, gotS *Workload
	client.OnPeer(func(_ string, w *Workload) { gotC = w })
	server.OnPeer(func(_ string, w *Workload) { gotS = w })
	if err := client.Send(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = client.Write([]byte("ping")) // a failed write shows as the server's failed read
	}()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	if _, err := server.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("client read %q, %v", buf, err)
	}
	if gotS == nil || *gotS != productpage || gotC == nil || gotC.Workload != "ratings-v1" {
		t.Errorf("peers: server saw %+v, client saw %+v", gotS, gotC)
	}
}

// A peer without the exchange: its bytes pass unchanged, the peer is
// unknown.
func TestConnNoExchange(t *testing.T) {
	a, b := pair(t)
	sf, _ := AppendExchange(nil, "server", Workload{})
	server := NewConn(b, sf)
	called := false
	server.OnPeer(func(_ string, w *Workload) { called = w == nil })
	if _, err := a.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 18)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "GET / HTTP/1.1\r\n\r\n" || !called {
		t.Errorf("read %q, %v, unknown peer told: %v", buf, err, called)
	}
}

// Hostile peers: a frame claiming more than the bound is refused before
// anything is buffered; a frame cut short by EOF is an error, not a hang.
func TestConnHostile(t *testing.T) {
	a, b := pair(t)
	server := NewConn(b, nil)
	if _, err := a.Write(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, Magic), 1<<31)); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Read(make([]byte, 10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge frame: %v", err)
	}

	a, b = pair(t)
	server = NewConn(b, nil)
	if _, err := a.Write(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, Magic), 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("short")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := server.Read(make([]byte, 10)); err == nil {
		t.Error("truncated frame read without error")
	}
}
