package http1

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// step is one scripted result of a fakeConn Read or Write.
type step struct {
	n     int
	err   error
	sleep time.Duration // before returning
}

// fakeConn is a net.Conn whose Read and Write return scripted results and
// which records the deadlines set on it. Past the script, calls return
// io.ErrClosedPipe, so a wrongly retrying loop ends.
type fakeConn struct {
	net.Conn
	reads, writes []step
	nRead, nWrite int
	rdl, wdl      []time.Time // SetReadDeadline / SetWriteDeadline arguments
	wrote         []byte
}

func (f *fakeConn) Read(p []byte) (int, error) {
	f.nRead++
	if len(f.reads) == 0 {
		return 0, io.ErrClosedPipe
	}
	s := f.reads[0]
	f.reads = f.reads[1:]
	time.Sleep(s.sleep)
	for i := 0; i < s.n; i++ {
		p[i] = 'r'
	}
	return s.n, s.err
}

func (f *fakeConn) Write(p []byte) (int, error) {
	f.nWrite++
	if len(f.writes) == 0 {
		return 0, io.ErrClosedPipe
	}
	s := f.writes[0]
	f.writes = f.writes[1:]
	time.Sleep(s.sleep)
	f.wrote = append(f.wrote, p[:s.n]...)
	return s.n, s.err
}

func (f *fakeConn) SetReadDeadline(t time.Time) error  { f.rdl = append(f.rdl, t); return nil }
func (f *fakeConn) SetWriteDeadline(t time.Time) error { f.wdl = append(f.wdl, t); return nil }

var errTimeout = os.ErrDeadlineExceeded

// TestDeadlineConnPassThrough checks that with no timeouts set, reads and
// writes go straight to the connection: no deadline is set and a timeout
// from someone else's deadline is returned as is, even after a partial
// write.
func TestDeadlineConnPassThrough(t *testing.T) {
	f := &fakeConn{
		reads:  []step{{n: 3}, {err: errTimeout}},
		writes: []step{{n: 2, err: errTimeout}, {n: 3}},
	}
	d := NewDeadlineConn(f)
	if n, err := d.Read(make([]byte, 8)); n != 3 || err != nil {
		t.Fatalf("Read = %d, %v; want 3, nil", n, err)
	}
	if n, err := d.Read(make([]byte, 8)); n != 0 || !IsTimeout(err) {
		t.Fatalf("Read = %d, %v; want 0, timeout", n, err)
	}
	if n, err := d.Write([]byte("abcde")); n != 2 || !IsTimeout(err) {
		t.Fatalf("Write = %d, %v; want 2, timeout (no retry without our own timeout)", n, err)
	}
	if f.nRead != 2 || f.nWrite != 1 || len(f.rdl) != 0 || len(f.wdl) != 0 {
		t.Fatalf("reads %d writes %d, read deadlines %v, write deadlines %v; want 2, 1, none, none", f.nRead, f.nWrite, f.rdl, f.wdl)
	}
}

// TestDeadlineConnWhichDeadline checks which deadline is armed for each
// setting: the hard deadline alone, the idle timeout counted from the call,
// or the earlier of the two.
func TestDeadlineConnWhichDeadline(t *testing.T) {
	hardNear := time.Now().Add(500 * time.Millisecond)
	hardFar := time.Now().Add(time.Hour)
	const idle = time.Second
	tests := []struct {
		name     string
		idle     time.Duration
		hard     time.Time
		wantHard bool // the hard deadline, else now+idle
	}{
		{"hard only", 0, hardFar, true},
		{"negative idle is none", -time.Second, hardFar, true},
		{"idle only", idle, time.Time{}, false},
		{"hard before idle", idle, hardNear, true},
		{"idle before hard", idle, hardFar, false},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/read", func(t *testing.T) {
			f := &fakeConn{reads: []step{{n: 1}}}
			d := NewDeadlineConn(f)
			d.SetReadTimeouts(tc.idle, tc.hard)
			before := time.Now()
			if n, err := d.Read(make([]byte, 4)); n != 1 || err != nil {
				t.Fatalf("Read = %d, %v", n, err)
			}
			after := time.Now()
			checkArmed(t, f.rdl, tc.wantHard, tc.hard, tc.idle, before, after)
		})
		t.Run(tc.name+"/write", func(t *testing.T) {
			f := &fakeConn{writes: []step{{n: 1}}}
			d := NewDeadlineConn(f)
			d.SetWriteTimeouts(tc.idle, tc.hard)
			before := time.Now()
			if n, err := d.Write([]byte("x")); n != 1 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			after := time.Now()
			checkArmed(t, f.wdl, tc.wantHard, tc.hard, tc.idle, before, after)
		})
	}
}

func checkArmed(t *testing.T, got []time.Time, wantHard bool, hard time.Time, idle time.Duration, before, after time.Time) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("deadlines set %v, want one", got)
	}
	if wantHard {
		if !got[0].Equal(hard) {
			t.Fatalf("deadline %v, want the hard one %v", got[0], hard)
		}
		return
	}
	if got[0].Before(before.Add(idle)) || got[0].After(after.Add(idle)) {
		t.Fatalf("deadline %v, want between %v and %v (idle %v from the call)", got[0], before.Add(idle), after.Add(idle), idle)
	}
}

// TestDeadlineConnClock checks that an idle timeout shorter than
// preciseBelow counts from the precise clock (a reading with a monotonic
// part) and one of exactly preciseBelow or more from the coarse clock
// (none).
func TestDeadlineConnClock(t *testing.T) {
	for _, tc := range []struct {
		idle    time.Duration
		precise bool
	}{
		{time.Second, true},
		{preciseBelow - 1, true},
		{preciseBelow, false},
		{time.Minute, false},
	} {
		f := &fakeConn{reads: []step{{n: 1}}, writes: []step{{n: 1}}}
		d := NewDeadlineConn(f)
		d.SetReadTimeouts(tc.idle, time.Time{})
		d.SetWriteTimeouts(tc.idle, time.Time{})
		mustRead(t, d, make([]byte, 1))
		mustWrite(t, d, []byte("x"))
		if len(f.rdl) != 1 || len(f.wdl) != 1 {
			t.Fatalf("idle %v: deadlines %v %v, want one each", tc.idle, f.rdl, f.wdl)
		}
		for _, dl := range []time.Time{f.rdl[0], f.wdl[0]} {
			if got := hasMonotonic(dl); got != tc.precise {
				t.Errorf("idle %v: deadline %v from the precise clock = %v, want %v", tc.idle, dl, got, tc.precise)
			}
		}
	}
}

// hasMonotonic reports whether t carries a monotonic clock reading, which
// time.Now gives and CoarseNow does not.
func hasMonotonic(t time.Time) bool { return strings.Contains(t.String(), " m=") }

// TestDeadlineConnRearm checks when the socket deadline is moved: not
// again for an unchanged deadline, at once for an earlier one or a later
// one beyond the slack (none without an idle timeout), and cleared when
// the timeouts are removed.
func TestDeadlineConnRearm(t *testing.T) {
	f := &fakeConn{reads: []step{{n: 1}, {n: 1}, {n: 1}, {n: 1}, {n: 1}, {n: 1}}}
	d := NewDeadlineConn(f)
	buf := make([]byte, 1)
	h1 := time.Now().Add(time.Hour)
	d.SetReadTimeouts(0, h1)
	mustRead(t, d, buf)
	mustRead(t, d, buf) // same deadline: not set again
	h2 := h1.Add(-time.Minute)
	d.SetReadHard(h2)
	mustRead(t, d, buf) // earlier: set
	h3 := h2.Add(time.Nanosecond)
	d.SetReadHard(h3)
	mustRead(t, d, buf) // later by more than the slack (0): set
	d.SetReadTimeouts(0, time.Time{})
	mustRead(t, d, buf) // cleared
	mustRead(t, d, buf) // nothing to clear
	want := []time.Time{h1, h2, h3, {}}
	if len(f.rdl) != len(want) {
		t.Fatalf("deadlines %v, want %v", f.rdl, want)
	}
	for i := range want {
		if !f.rdl[i].Equal(want[i]) {
			t.Fatalf("deadline %d = %v, want %v (all: %v)", i, f.rdl[i], want[i], f.rdl)
		}
	}
}

// TestDeadlineConnLazy: with SetReadLazy, a wanted deadline later than the
// socket's leaves it; an earlier one is set; one that fired early is set
// again at the wanted time and the read resumed.
func TestDeadlineConnLazy(t *testing.T) {
	f := &fakeConn{reads: []step{{n: 1}, {n: 1}, {n: 1}, {err: errTimeout}, {n: 1}}}
	d := NewDeadlineConn(f)
	d.SetReadLazy(true)
	buf := make([]byte, 1)
	h1 := time.Now().Add(time.Hour)
	d.SetReadTimeouts(0, h1)
	mustRead(t, d, buf) // set
	d.SetReadHard(h1.Add(time.Minute))
	mustRead(t, d, buf) // later: kept at h1
	h2 := h1.Add(-time.Minute)
	d.SetReadHard(h2)
	mustRead(t, d, buf) // earlier: set
	h3 := h2.Add(time.Hour)
	d.SetReadHard(h3)
	if n, err := d.Read(buf); n != 1 || err != nil { // h2 fires early for h3: set h3, resume
		t.Fatalf("read after an early deadline = %d, %v; want the read resumed", n, err)
	}
	want := []time.Time{h1, h2, h3}
	if len(f.rdl) != len(want) {
		t.Fatalf("deadlines %v, want %v", f.rdl, want)
	}
	for i := range want {
		if !f.rdl[i].Equal(want[i]) {
			t.Fatalf("deadline %d = %v, want %v (all: %v)", i, f.rdl[i], want[i], f.rdl)
		}
	}
}

// TestDeadlineConnSlack checks the lazy re-arming of an idle timeout: a
// deadline that moved by more than idle/16 is set again.
func TestDeadlineConnSlack(t *testing.T) {
	f := &fakeConn{reads: []step{{n: 1}, {n: 1}}}
	d := NewDeadlineConn(f)
	d.SetReadTimeouts(time.Second, time.Time{}) // slack 62.5ms
	buf := make([]byte, 1)
	mustRead(t, d, buf)
	time.Sleep(100 * time.Millisecond)
	mustRead(t, d, buf)
	if len(f.rdl) != 2 || f.rdl[1].Sub(f.rdl[0]) < 100*time.Millisecond {
		t.Fatalf("deadlines %v: want two, 100ms or more apart", f.rdl)
	}
}

// TestDeadlineConnReadTimeouts checks how Read handles a timeout error: an
// early one (the socket deadline armed lazily before the wanted one) is
// retried with the deadline set again; a real one, one that came with
// data, and other errors are returned.
func TestDeadlineConnReadTimeouts(t *testing.T) {
	future := time.Now().Add(time.Hour)
	past := time.Now().Add(-time.Second)
	tests := []struct {
		name      string
		hard      time.Time
		reads     []step
		n         int
		timeout   bool // the error returned is a timeout
		wantErr   error
		wantReads int
	}{
		{"data", future, []step{{n: 3}}, 3, false, nil, 1},
		{"early timeout retried", future, []step{{err: errTimeout}, {n: 2}}, 2, false, nil, 2},
		{"real timeout", past, []step{{err: errTimeout}}, 0, true, nil, 1},
		{"timeout with data", future, []step{{n: 3, err: errTimeout}}, 3, true, nil, 1},
		{"EOF", future, []step{{err: io.EOF}}, 0, false, io.EOF, 1},
		{"EOF with data", future, []step{{n: 2, err: io.EOF}}, 2, false, io.EOF, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeConn{reads: tc.reads}
			d := NewDeadlineConn(f)
			d.SetReadTimeouts(0, tc.hard)
			n, err := d.Read(make([]byte, 8))
			if n != tc.n || IsTimeout(err) != tc.timeout || (!tc.timeout && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("Read = %d, %v; want %d, timeout %v / %v", n, err, tc.n, tc.timeout, tc.wantErr)
			}
			if f.nRead != tc.wantReads {
				t.Fatalf("%d reads, want %d", f.nRead, tc.wantReads)
			}
			wantArms := tc.wantReads // re-armed for each retry
			if len(f.rdl) != wantArms {
				t.Fatalf("deadlines %v, want %d", f.rdl, wantArms)
			}
		})
	}
}

// TestDeadlineConnReadTimeoutForeign checks that a timeout from a deadline
// set by someone else, after ours was cleared, is returned.
func TestDeadlineConnReadTimeoutForeign(t *testing.T) {
	f := &fakeConn{reads: []step{{n: 1}, {err: errTimeout}}}
	d := NewDeadlineConn(f)
	d.SetReadTimeouts(0, time.Now().Add(time.Hour))
	mustRead(t, d, make([]byte, 1))
	d.SetReadTimeouts(0, time.Time{})
	if n, err := d.Read(make([]byte, 1)); n != 0 || !IsTimeout(err) || f.nRead != 2 {
		t.Fatalf("Read = %d, %v after %d reads; want 0, timeout after 2", n, err, f.nRead)
	}
}

// TestDeadlineConnIdleProgress checks what counts as progress for the
// idle timeout: a read or write that returned nothing does not move the
// deadline when the call is retried; a write that made progress does.
func TestDeadlineConnIdleProgress(t *testing.T) {
	const idle = time.Second
	const pause = 20 * time.Millisecond
	t.Run("read without data", func(t *testing.T) {
		f := &fakeConn{reads: []step{{err: errTimeout, sleep: pause}, {n: 1}}}
		d := NewDeadlineConn(f)
		d.SetReadTimeouts(idle, time.Time{})
		if n, err := d.Read(make([]byte, 1)); n != 1 || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
		if len(f.rdl) != 2 || !f.rdl[1].Equal(f.rdl[0]) {
			t.Fatalf("deadlines %v: want the same one twice", f.rdl)
		}
	})
	t.Run("write without progress", func(t *testing.T) {
		f := &fakeConn{writes: []step{{err: errTimeout, sleep: pause}, {n: 3}}}
		d := NewDeadlineConn(f)
		d.SetWriteTimeouts(idle, time.Time{})
		if n, err := d.Write([]byte("abc")); n != 3 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if len(f.wdl) != 2 || !f.wdl[1].Equal(f.wdl[0]) {
			t.Fatalf("deadlines %v: want the same one twice", f.wdl)
		}
	})
	t.Run("write with progress", func(t *testing.T) {
		f := &fakeConn{writes: []step{{n: 1, err: errTimeout, sleep: pause}, {n: 2}}}
		d := NewDeadlineConn(f)
		d.SetWriteTimeouts(idle, time.Time{})
		if n, err := d.Write([]byte("abc")); n != 3 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if len(f.wdl) != 2 || f.wdl[1].Sub(f.wdl[0]) < pause {
			t.Fatalf("deadlines %v: want the second %v or more after the first", f.wdl, pause)
		}
	})
}

// TestDeadlineConnWriteTimeouts checks how Write handles errors: a timeout
// after partial progress resumes the rest (even past the deadline, since
// progress was made), an early timeout is retried, and a real timeout
// without progress, a timeout once all is written, and other errors are
// returned.
func TestDeadlineConnWriteTimeouts(t *testing.T) {
	future := time.Now().Add(time.Hour)
	past := time.Now().Add(-time.Second)
	tests := []struct {
		name       string
		hard       time.Time
		writes     []step
		n          int
		timeout    bool
		wantErr    error
		wantWrites int
	}{
		{"all", future, []step{{n: 5}}, 5, false, nil, 1},
		{"partial then timeout resumes", past, []step{{n: 2, err: errTimeout}, {n: 3}}, 5, false, nil, 2},
		{"early timeout retried", future, []step{{err: errTimeout}, {n: 5}}, 5, false, nil, 2},
		{"real timeout", past, []step{{err: errTimeout}}, 0, true, nil, 1},
		{"timeout with all written", future, []step{{n: 5, err: errTimeout}}, 5, true, nil, 1},
		{"other error after progress", future, []step{{n: 2, err: io.ErrShortWrite}}, 2, false, io.ErrShortWrite, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeConn{writes: tc.writes}
			d := NewDeadlineConn(f)
			d.SetWriteTimeouts(0, tc.hard)
			n, err := d.Write([]byte("abcde"))
			if n != tc.n || IsTimeout(err) != tc.timeout || (!tc.timeout && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("Write = %d, %v; want %d, timeout %v / %v", n, err, tc.n, tc.timeout, tc.wantErr)
			}
			if f.nWrite != tc.wantWrites {
				t.Fatalf("%d writes, want %d", f.nWrite, tc.wantWrites)
			}
			if string(f.wrote) != "abcde"[:tc.n] {
				t.Fatalf("wrote %q, want %q", f.wrote, "abcde"[:tc.n])
			}
			if len(f.wdl) != tc.wantWrites {
				t.Fatalf("deadlines %v, want %d", f.wdl, tc.wantWrites)
			}
		})
	}
}

// TestDeadlineConnCloseWrite checks that CloseWrite reaches a connection
// that has it and is a no-op otherwise.
func TestDeadlineConnCloseWrite(t *testing.T) {
	if err := NewDeadlineConn(&fakeConn{}).CloseWrite(); err != nil {
		t.Fatalf("CloseWrite without support: %v", err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cw := &closeWriter{Conn: a}
	if err := NewDeadlineConn(cw).CloseWrite(); err != nil || !cw.closed {
		t.Fatalf("CloseWrite = %v, closed %v", err, cw.closed)
	}
}

type closeWriter struct {
	net.Conn
	closed bool
}

func (c *closeWriter) CloseWrite() error { c.closed = true; return nil }

// TestDeadline checks Deadline: none for a zero or negative duration, the
// precise clock below preciseBelow and the coarse one from it, about d
// from now either way.
func TestDeadline(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if got := Deadline(d); !got.IsZero() {
			t.Errorf("Deadline(%v) = %v, want zero", d, got)
		}
	}
	for _, tc := range []struct {
		d       time.Duration
		precise bool
	}{
		{1, true},
		{time.Second, true},
		{preciseBelow - 1, true},
		{preciseBelow, false},
		{time.Hour, false},
	} {
		before := time.Now()
		got := Deadline(tc.d)
		if hasMonotonic(got) != tc.precise {
			t.Errorf("Deadline(%v) = %v: precise %v, want %v", tc.d, got, !tc.precise, tc.precise)
		}
		// The coarse clock lags by up to a tick (and is read at a tick).
		lo, hi := before.Add(tc.d), time.Now().Add(tc.d)
		if !tc.precise {
			lo = lo.Add(-2 * CoarseTick)
		}
		if got.Before(lo) || got.After(hi) {
			t.Errorf("Deadline(%v) = %v, want between %v and %v", tc.d, got, lo, hi)
		}
	}
}

// TestCoarseNowTicks checks that the coarse clock moves.
func TestCoarseNowTicks(t *testing.T) {
	start := CoarseNow()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(CoarseTick / 4) {
		if CoarseNow().After(start) {
			return
		}
	}
	t.Fatalf("CoarseNow stayed at %v for 5s", start)
}

// mustRead reads from d where the script gives one byte and no error, and
// fails the test otherwise.
func mustRead(t *testing.T, d *DeadlineConn, buf []byte) {
	t.Helper()
	if n, err := d.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v; want 1, nil", n, err)
	}
}

// mustWrite writes b to d where the script takes one byte and no error,
// and fails the test otherwise.
func mustWrite(t *testing.T, d *DeadlineConn, b []byte) {
	t.Helper()
	if n, err := d.Write(b); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v; want 1, nil", n, err)
	}
}
