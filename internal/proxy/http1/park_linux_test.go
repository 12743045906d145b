package http1

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/testreq"
)

// parkedConn records what the Parker did with it.
type parkedConn struct {
	resumed, finished chan struct{}
	finishedAt        atomic.Int64 // Unix nanoseconds
}

func newParkedConn() *parkedConn {
	return &parkedConn{resumed: make(chan struct{}, 1), finished: make(chan struct{}, 1)}
}

func (c *parkedConn) Resume() { c.resumed <- struct{}{} }
func (c *parkedConn) Finish() {
	c.finishedAt.Store(time.Now().UnixNano())
	c.finished <- struct{}{}
}

// waitFor reports whether ch receives within d.
func waitFor(ch chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestParker parks real loopback sockets: one that becomes readable is
// resumed (and no longer parked), one whose deadline passes is finished,
// one taken back is neither, and Close finishes what is still parked.
func TestParker(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))

	client, server := tcpPair(t)
	nc := WrapConn(server)
	c, slot := newParkedConn(), &ParkSlot{}
	if !p.Park(slot, nc, c, time.Time{}) {
		t.Fatal("Park = false for a TCP socket")
	}
	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(c.resumed, 5*time.Second) {
		t.Fatal("a readable parked connection was not resumed")
	}
	if p.Take(slot) {
		t.Error("Take = true for a connection already resumed")
	}

	_, server2 := tcpPair(t)
	c2, slot2 := newParkedConn(), &ParkSlot{}
	if !p.Park(slot2, WrapConn(server2), c2, time.Now().Add(50*time.Millisecond)) {
		t.Fatal("Park = false")
	}
	if !waitFor(c2.finished, 5*time.Second) {
		t.Fatal("a parked connection was not finished at its deadline")
	}
	if waitFor(c2.resumed, 0) {
		t.Error("a connection finished at its deadline was also resumed")
	}

	_, server3 := tcpPair(t)
	c3, slot3 := newParkedConn(), &ParkSlot{}
	if !p.Park(slot3, WrapConn(server3), c3, time.Now().Add(time.Hour)) {
		t.Fatal("Park = false")
	}
	if !p.Take(slot3) {
		t.Fatal("Take = false for a parked connection")
	}
	slot3.CloseFD()

	_, server4 := tcpPair(t)
	c4, slot4 := newParkedConn(), &ParkSlot{}
	if !p.Park(slot4, WrapConn(server4), c4, time.Time{}) {
		t.Fatal("Park = false")
	}
	p.Close()
	if !waitFor(c4.finished, 5*time.Second) {
		t.Error("Close did not finish a parked connection")
	}
	if waitFor(c3.finished, 0) || waitFor(c3.resumed, 0) {
		t.Error("a connection taken back was finished or resumed")
	}
	_, server5 := tcpPair(t)
	if p.Park(&ParkSlot{}, WrapConn(server5), newParkedConn(), time.Time{}) {
		t.Error("Park = true after Close")
	}
}

// TestParkerDeadlines parks connections with deadlines in no order (one
// timer serves them all): each is finished at its deadline, not before,
// and one taken back before its deadline never is.
func TestParkerDeadlines(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	const n = 24
	start := time.Now()
	type parked struct {
		c        *parkedConn
		slot     *ParkSlot
		deadline time.Time
	}
	conns := make([]parked, n)
	for i := range conns {
		_, server := tcpPair(t)
		// Deadlines 40 ms apart, parked in a shuffled order.
		dl := start.Add(time.Duration(50+((i*7)%n)*40) * time.Millisecond)
		conns[i] = parked{newParkedConn(), &ParkSlot{}, dl}
		if !p.Park(conns[i].slot, WrapConn(server), conns[i].c, dl) {
			t.Fatal("Park = false")
		}
	}
	for i := 0; i < n; i += 3 { // take every third back
		if !p.Take(conns[i].slot) {
			t.Fatalf("Take(%d) = false", i)
		}
		conns[i].slot.CloseFD()
	}
	for i, pc := range conns {
		if i%3 == 0 {
			continue
		}
		if !waitFor(pc.c.finished, 5*time.Second) {
			t.Fatalf("connection %d (deadline +%v) was not finished", i, pc.deadline.Sub(start))
		}
		at := time.Unix(0, pc.c.finishedAt.Load())
		if at.Before(pc.deadline) {
			t.Fatalf("connection %d finished %v before its deadline", i, pc.deadline.Sub(at))
		}
		if late := at.Sub(pc.deadline); late > 300*time.Millisecond {
			t.Fatalf("connection %d finished %v after its deadline", i, late)
		}
	}
	for i := 0; i < n; i += 3 {
		if waitFor(conns[i].c.finished, 0) || waitFor(conns[i].c.resumed, 0) {
			t.Errorf("connection %d, taken back, was finished or resumed", i)
		}
	}
}

// TestParkerTrimsAfterABurst: once trimMinParks connections parked and
// parking then went quiet for trimQuiet, the Parker gives the burst's
// memory back (once); fewer parks, or parks still coming, do not trim.
func TestParkerTrimsAfterABurst(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	lastTrim := func() time.Time {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.trim.lastTrim
	}
	park := func() {
		t.Helper()
		_, server := tcpPair(t)
		if !p.Park(&ParkSlot{}, WrapConn(server), newParkedConn(), time.Time{}) {
			t.Fatal("Park = false")
		}
	}
	for range trimMinParks - 1 {
		park()
	}
	time.Sleep(trimQuiet + 200*time.Millisecond)
	if !lastTrim().IsZero() {
		t.Fatalf("trimmed after %d parks, fewer than %d", trimMinParks-1, trimMinParks)
	}
	park()
	if !lastTrim().IsZero() {
		t.Fatal("trimmed while connections were still parking")
	}
	deadline := time.Now().Add(trimQuiet + 5*time.Second)
	for lastTrim().IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("no trim %v after a burst of %d parks went quiet", trimQuiet+5*time.Second, trimMinParks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.mu.Lock()
	parks := p.trim.parks
	p.mu.Unlock()
	if parks != 0 {
		t.Fatalf("%d parks counted after the trim, want 0", parks)
	}
}

// TestParkClosedConn: a connection closed before it is parked (a drain
// closed it meanwhile) is refused: Park reports false and holds nothing.
func TestParkClosedConn(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	_, server := tcpPair(t)
	nc := WrapConn(server)
	if err := nc.Close(); err != nil {
		t.Fatal(err)
	}
	c, slot := newParkedConn(), &ParkSlot{}
	if p.Park(slot, nc, c, time.Time{}) {
		t.Fatal("Park = true for a closed connection")
	}
	if slot.held || slot.id.Load() != 0 {
		t.Errorf("a refused slot holds a descriptor (%v) or an id (%d)", slot.held, slot.id.Load())
	}
	if p.Take(slot) {
		t.Error("Take = true for a connection Park refused")
	}
}

// TestParkerEarlierDeadline: a connection parked with a deadline earlier
// than every one already parked is finished at its own deadline, not at
// theirs.
func TestParkerEarlierDeadline(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	_, s1 := tcpPair(t)
	late := newParkedConn()
	if !p.Park(&ParkSlot{}, WrapConn(s1), late, time.Now().Add(time.Hour)) {
		t.Fatal("Park = false")
	}
	_, s2 := tcpPair(t)
	early := newParkedConn()
	if !p.Park(&ParkSlot{}, WrapConn(s2), early, time.Now().Add(100*time.Millisecond)) {
		t.Fatal("Park = false")
	}
	if !waitFor(early.finished, 10*time.Second) {
		t.Fatal("a connection parked with the earliest deadline was not finished at it")
	}
	if waitFor(late.finished, 0) {
		t.Error("a connection was finished an hour before its deadline")
	}
}

// TestParkerResumeConn: a resumed connection's slot gives the same socket
// back as a working net.Conn (the bytes that woke it are there to read,
// and it writes to the peer), once; a slot holding no descriptor gives an
// error.
func TestParkerResumeConn(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	client, server := tcpPair(t)
	c, slot := newParkedConn(), &ParkSlot{}
	if !p.Park(slot, WrapConn(server), c, time.Time{}) {
		t.Fatal("Park = false")
	}
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(c.resumed, 10*time.Second) {
		t.Fatal("a readable parked connection was not resumed")
	}
	nc, err := slot.ResumeConn()
	if err != nil {
		t.Fatalf("ResumeConn: %v", err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(nc, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v from the resumed connection; want \"ping\"", buf, err)
	}
	if _, err := nc.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("the peer read %q, %v; want \"pong\"", buf, err)
	}
	if _, err := slot.ResumeConn(); err == nil {
		t.Error("ResumeConn succeeded twice on one descriptor")
	}
	if _, err := (&ParkSlot{}).ResumeConn(); err == nil {
		t.Error("ResumeConn succeeded on a slot never parked")
	}
}

// lockedBuffer is a log sink safe for the Parker's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestParkerCloseQuiet: Close of a running Parker wakes its goroutine,
// waits for it to end, and logs nothing.
func TestParkerCloseQuiet(t *testing.T) {
	var logs lockedBuffer
	p := NewParker(slog.New(slog.NewTextHandler(&logs, nil)))
	_, server := tcpPair(t)
	c := newParkedConn()
	if !p.Park(&ParkSlot{}, WrapConn(server), c, time.Time{}) {
		t.Fatal("Park = false")
	}
	p.Close()
	select {
	case <-p.done:
	default:
		t.Error("Close returned before the Parker's goroutine ended")
	}
	select {
	case <-c.finished:
	default:
		t.Error("Close did not finish the parked connection")
	}
	if s := logs.String(); s != "" {
		t.Errorf("Close logged: %s", s)
	}
	p.Close() // twice: returns
}

// TestParkerTrimPacing: a burst's trim waits for trimEvery after the last
// trim: a Parker that trimmed longer ago than that trims again once
// parking is quiet, one that trimmed more recently waits on.
func TestParkerTrimPacing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lastTrim  time.Duration // before now
		wantTrims bool
	}{
		{"last trim long ago", 2 * trimEvery, true},
		{"last trim recent", trimEvery / 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParker(slog.New(slog.DiscardHandler))
			defer p.Close()
			now := time.Now()
			p.mu.Lock()
			p.trim = trimState{parks: trimMinParks, lastPark: now.Add(-2 * trimQuiet),
				lastTrim: now.Add(-tc.lastTrim), armed: true, timer: time.AfterFunc(time.Hour, func() {})}
			p.mu.Unlock()
			p.trimMemory()
			p.mu.Lock()
			parks, armed, last := p.trim.parks, p.trim.armed, p.trim.lastTrim
			p.mu.Unlock()
			trimmed := !last.Before(now)
			if trimmed != tc.wantTrims || trimmed == (parks != 0) || trimmed == armed {
				t.Errorf("trimmed %v (parks %d, armed %v), want trimmed %v", trimmed, parks, armed, tc.wantTrims)
			}
		})
	}
}

// TestParkerEpollWaitInterrupted: a signal that interrupts the Parker's
// epoll_wait (the Go runtime preempts with SIGURG) is not the end of its
// loop: it waits again, and a connection parked before the signal is
// resumed when it becomes readable after it. The signal goes to the thread
// blocked in epoll_wait on the Parker's epoll set (/proc/self/task/*/syscall);
// the test then waits for that thread to have slept again (its voluntary
// context switches move on) and for the loop to be blocked on the epoll set
// again, or to have ended.
func TestParkerEpollWaitInterrupted(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	client, server := tcpPair(t)
	c, slot := newParkedConn(), &ParkSlot{}
	if !p.Park(slot, WrapConn(server), c, time.Time{}) {
		t.Fatal("Park = false")
	}
	tid, ok := waitEpollThread(t, p.epfd, nil)
	if !ok {
		t.Fatal("no thread blocked in epoll_wait on the Parker's epoll set")
	}
	switches := voluntarySwitches(tid)
	if err := unix.Tgkill(os.Getpid(), tid, unix.SIGURG); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitEpollThread(t, p.epfd, func(id int) bool { return id != tid || voluntarySwitches(tid) > switches }); !ok {
		t.Fatal("the Parker's loop did not wait on its epoll set again after epoll_wait was interrupted")
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(c.resumed, 10*time.Second) {
		t.Fatal("a parked connection readable after the interrupt was not resumed")
	}
}

// waitEpollThread waits up to 20 s for a thread blocked in a system call
// on epfd (which only the Parker's loop blocks in) that ok accepts (nil:
// any); false when there is none by then or the Parker's loop ended.
func waitEpollThread(t *testing.T, epfd int, ok func(tid int) bool) (int, bool) {
	t.Helper()
	arg := fmt.Sprintf("0x%x", epfd)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			testreq.Missing(t, "no /proc/self/task: %v", err)
		}
		readable := false
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/syscall")
			if err != nil {
				continue // the thread ended
			}
			readable = true
			// "number arg0 arg1 ...", or "running".
			if f := strings.Fields(string(b)); len(f) > 1 && f[1] == arg {
				tid, _ := strconv.Atoi(task.Name())
				if ok == nil || ok(tid) {
					return tid, true
				}
			}
		}
		if !readable {
			testreq.Missing(t, "/proc/self/task/*/syscall cannot be read here")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, false
}

// voluntarySwitches is how many times thread tid went to sleep.
func voluntarySwitches(tid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
