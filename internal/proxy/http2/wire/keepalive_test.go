package wire

import (
	"testing"
	"time"

	"golang.org/x/net/http2"
)

func TestKeepalive(t *testing.T) {
	const interval, timeout = 10 * time.Second, 3 * time.Second
	type check struct {
		read uint64
		step KeepaliveStep
		wait time.Duration
	}
	for _, c := range []struct {
		name   string
		checks []check
	}{
		{"frames keep coming", []check{{1, KeepaliveWait, interval}, {5, KeepaliveWait, interval}, {6, KeepaliveWait, interval}}},
		{"silent from the start", []check{{0, KeepalivePing, timeout}, {0, KeepaliveClose, 0}}},
		{"ping timeout", []check{{4, KeepaliveWait, interval}, {4, KeepalivePing, timeout}, {4, KeepaliveClose, 0}}},
		{"a frame after the ping", []check{{4, KeepaliveWait, interval}, {4, KeepalivePing, timeout}, {5, KeepaliveWait, interval}, {5, KeepalivePing, timeout}, {5, KeepaliveClose, 0}}},
		{"a counter that wrapped is a change", []check{{1<<64 - 1, KeepaliveWait, interval}, {0, KeepaliveWait, interval}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var k Keepalive
			for i, ch := range c.checks {
				step, wait, next := k.Check(ch.read, interval, timeout)
				if step != ch.step || wait != ch.wait {
					t.Fatalf("check %d (read %d): step %d wait %v, want %d and %v", i, ch.read, step, wait, ch.step, ch.wait)
				}
				k = next
			}
		})
	}
}

func TestAcks(t *testing.T) {
	other := [8]byte{1, 2, 3}
	for _, c := range []struct {
		name       string
		ack        bool
		data, want [8]byte
		match      bool
	}{
		{"drain ACK", true, DrainPingData, DrainPingData, true},
		{"keepalive ACK", true, KeepalivePingData, KeepalivePingData, true},
		{"keepalive ACK is not the drain's", true, KeepalivePingData, DrainPingData, false},
		{"another payload", true, other, DrainPingData, false},
		{"the peer's PING with our payload", false, DrainPingData, DrainPingData, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &http2.PingFrame{Data: c.data}
			if c.ack {
				f.Flags = http2.FlagPingAck
			}
			if got := Acks(f, c.want); got != c.match {
				t.Fatalf("Acks = %v, want %v", got, c.match)
			}
		})
	}
	if KeepalivePingData == DrainPingData {
		t.Fatal("the keepalive and drain PINGs carry the same payload: their ACKs cannot be told apart")
	}
}

func TestIdleWait(t *testing.T) {
	const timeout = 10 * time.Second
	for _, c := range []struct {
		busy    bool
		idleFor time.Duration
		want    time.Duration
	}{
		{true, 0, timeout},
		{true, 2 * timeout, timeout},
		{false, 0, timeout},
		{false, 3 * time.Second, 7 * time.Second},
		{false, timeout - 1, 1},
		{false, timeout, 0},
		{false, timeout + 1, 0},
		{false, 5 * timeout, 0},
	} {
		if got := IdleWait(c.busy, c.idleFor, timeout); got != c.want {
			t.Errorf("IdleWait(busy %v, idle for %v) = %v, want %v", c.busy, c.idleFor, got, c.want)
		}
	}
}
