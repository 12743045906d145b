package http1

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The Parker's epoll set and eventfd are descriptors like any other: these
// tests run in a child process (the test binary again, with
// parkerChildEnv naming the case), since they change what descriptors
// the whole process can get.
const parkerChildEnv = "STRAIT_HTTP1_PARKER_CHILD"

// TestParkerDescriptorEdges: with no descriptor to spare, Park refuses
// (the connection stays the caller's), the Parker logs why, and Close is
// quiet; with stdin closed, the epoll set may be descriptor 0, and parking,
// resuming and Close work all the same.
func TestParkerDescriptorEdges(t *testing.T) {
	for _, mode := range []string{"no-descriptors", "epoll-at-0"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestParkerChild$", "-test.v")
			cmd.Env = append(os.Environ(), parkerChildEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the child did not finish in 2 minutes (a Close that never returned?):\n%s", out)
			}
			if err != nil || !strings.Contains(string(out), "--- PASS: TestParkerChild") {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

// TestParkerChild is TestParkerDescriptorEdges' child; it does nothing in
// a normal run.
func TestParkerChild(t *testing.T) {
	mode := os.Getenv(parkerChildEnv)
	if mode == "" {
		return // run by TestParkerDescriptorEdges, in a child process
	}
	var logs lockedBuffer
	p := NewParker(slog.New(slog.NewTextHandler(&logs, nil)))
	client, server := tcpPair(t)
	switch mode {
	case "no-descriptors":
		// The lowest free descriptor is the first the kernel would give:
		// a limit at it leaves none.
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		old := lim
		lim.Cur = uint64(fd)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		nc := WrapConn(server)
		parked := p.Park(&ParkSlot{}, nc, newParkedConn(), time.Time{})
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
		if parked {
			t.Fatal("Park = true without a descriptor for the epoll set")
		}
		// The connection is still the caller's, and open.
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Read(buf); err != nil {
			t.Fatalf("the refused connection: %v", err)
		}
		p.Close()
		if s := logs.String(); !strings.Contains(s, "cannot be parked") || strings.Count(s, "\n") != 1 {
			t.Fatalf("logs: %q; want the one warning that parking is unavailable", s)
		}
	case "epoll-at-0":
		if err := os.Stdin.Close(); err != nil {
			t.Fatal(err)
		}
		c, slot := newParkedConn(), &ParkSlot{}
		if !p.Park(slot, WrapConn(server), c, time.Time{}) {
			t.Fatalf("Park = false with the epoll set at descriptor 0; logs: %s", logs.String())
		}
		if p.epfd != 0 {
			t.Fatalf("the epoll set is descriptor %d, not 0", p.epfd)
		}
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if !waitFor(c.resumed, 10*time.Second) {
			t.Fatal("a readable parked connection was not resumed")
		}
		slot.CloseFD()
		_, server2 := tcpPair(t)
		c2 := newParkedConn()
		if !p.Park(&ParkSlot{}, WrapConn(server2), c2, time.Time{}) {
			t.Fatal("Park = false")
		}
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		if !waitFor(closed, 20*time.Second) {
			t.Fatal("Close did not return in 20 s (the Parker's goroutine was not woken?)")
		}
		select {
		case <-c2.finished:
		default:
			t.Error("Close did not finish the parked connection")
		}
		if s := logs.String(); s != "" {
			t.Fatalf("logs: %s", s)
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}
