package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"golang.org/x/net/http2"
)

func TestWindowSizes(t *testing.T) {
	for _, c := range []struct {
		n, stream, conn uint32
	}{
		{0, 0, InitialWindow},
		{1, 1, InitialWindow},
		{InitialWindow - 1, InitialWindow - 1, InitialWindow},
		{InitialWindow, InitialWindow, InitialWindow},
		{InitialWindow + 1, InitialWindow + 1, InitialWindow + 1},
		{MaxWindow, MaxWindow, MaxWindow},
		{MaxWindow + 1, MaxWindow, MaxWindow},
		{1<<32 - 1, MaxWindow, MaxWindow},
	} {
		if got := StreamWindowSize(c.n); got != c.stream {
			t.Errorf("StreamWindowSize(%d) = %d, want %d", c.n, got, c.stream)
		}
		if got := ConnWindowSize(c.n); got != c.conn {
			t.Errorf("ConnWindowSize(%d) = %d, want %d", c.n, got, c.conn)
		}
	}
}

// recvOp is one call on a RecvWindow: take, hold or ret, with what it
// must answer and the window it must leave.
type recvOp struct {
	op    string
	n     uint32
	ok    bool   // take: accepted
	inc   uint32 // ret: the WINDOW_UPDATE increment
	avail int32
}

func TestRecvWindowOps(t *testing.T) {
	for _, c := range []struct {
		name            string
		size, threshold uint32
		ops             []recvOp
	}{
		{"take all of it", 100, 50, []recvOp{
			{op: "take", n: 100, ok: true, avail: 0},
			{op: "take", n: 1, ok: false, avail: 0},
			{op: "take", n: 0, ok: true, avail: 0},
		}},
		{"overflow counts nothing", 100, 50, []recvOp{
			{op: "take", n: 101, ok: false, avail: 100},
			{op: "take", n: 1 << 31, ok: false, avail: 100},
			{op: "take", n: 1<<32 - 1, ok: false, avail: 100},
		}},
		{"update at the threshold", 100, 40, []recvOp{
			{op: "take", n: 60, ok: true, avail: 40},
			{op: "ret", n: 39, inc: 0, avail: 40},
			{op: "ret", n: 1, inc: 40, avail: 80},
			{op: "ret", n: 5, inc: 0, avail: 80},
			{op: "ret", n: 35, inc: 40, avail: 120},
		}},
		{"held bytes go with the next update", 100, 40, []recvOp{
			{op: "take", n: 100, ok: true, avail: 0},
			{op: "hold", n: 30, avail: 0},
			{op: "hold", n: 30, avail: 0}, // past the threshold: still no update
			{op: "ret", n: 1, inc: 61, avail: 61},
		}},
		{"a MiB is given back whatever the threshold", 16 << 20, 8 << 20, []recvOp{
			{op: "take", n: 2 << 20, ok: true, avail: 14 << 20},
			{op: "ret", n: 1<<20 - 1, inc: 0, avail: 14 << 20},
			{op: "ret", n: 1, inc: 1 << 20, avail: 15 << 20},
		}},
		{"zero threshold: every return", 10, 0, []recvOp{
			{op: "take", n: 10, ok: true, avail: 0},
			{op: "ret", n: 3, inc: 3, avail: 3},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := NewRecvWindow(c.size, c.threshold)
			if w.Avail() != int32(c.size) {
				t.Fatalf("new window: avail %d, want %d", w.Avail(), c.size)
			}
			for i, o := range c.ops {
				switch o.op {
				case "take":
					if ok := w.Take(o.n); ok != o.ok {
						t.Fatalf("op %d: Take(%d) = %v, want %v", i, o.n, ok, o.ok)
					}
				case "hold":
					w.Hold(o.n)
				case "ret":
					if inc := w.Return(o.n); inc != o.inc {
						t.Fatalf("op %d: Return(%d) = %d, want %d", i, o.n, inc, o.inc)
					}
				}
				if w.Avail() != o.avail {
					t.Fatalf("op %d (%s %d): avail %d, want %d", i, o.op, o.n, w.Avail(), o.avail)
				}
			}
		})
	}
}

func TestSendWindow(t *testing.T) {
	for _, c := range []struct {
		name  string
		start int32
		op    string // grow or shift
		n     int64
		ok    bool
		avail int32
	}{
		{"grow", InitialWindow, "grow", 100, true, InitialWindow + 100},
		{"grow to the largest window", InitialWindow, "grow", MaxWindow - InitialWindow, true, MaxWindow},
		{"grow one past it", InitialWindow, "grow", MaxWindow - InitialWindow + 1, false, InitialWindow},
		{"grow by the largest increment", 1, "grow", MaxWindow, false, 1},
		{"grow a negative window", -10, "grow", MaxWindow, true, MaxWindow - 10},
		{"shift down past zero", 100, "shift", -300, true, -200},
		{"shift up to the largest window", 0, "shift", MaxWindow, true, MaxWindow},
		{"shift past it", 1, "shift", MaxWindow, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := NewSendWindow(c.start)
			var ok bool
			if c.op == "grow" {
				ok = w.Grow(uint32(c.n))
			} else {
				ok = w.Shift(c.n)
			}
			if ok != c.ok || w.Avail() != c.avail {
				t.Fatalf("%s(%d) from %d: %v, avail %d; want %v, avail %d", c.op, c.n, c.start, ok, w.Avail(), c.ok, c.avail)
			}
		})
	}
	w := NewSendWindow(10)
	w.Spend(4)
	if w.Avail() != 6 {
		t.Fatalf("Spend(4) of 10: avail %d, want 6", w.Avail())
	}
}

func TestSpendData(t *testing.T) {
	for _, c := range []struct {
		name                 string
		n, limit             int
		stream, conn         int32
		k                    int
		streamLeft, connLeft int32
	}{
		{"all of it", 10, 100, 50, 60, 10, 40, 50},
		{"the frame size", 100, 16, 50, 60, 16, 34, 44},
		{"the stream window", 100, 100, 30, 60, 30, 0, 30},
		{"the connection window", 100, 100, 50, 20, 20, 30, 0},
		{"stream closed", 100, 100, 0, 60, 0, 0, 60},
		{"connection closed", 100, 100, 60, 0, 0, 60, 0},
		{"stream negative", 100, 100, -5, 60, 0, -5, 60},
		{"connection negative", 100, 100, 60, -5, 0, 60, -5},
		{"no data on a negative window", 0, 100, -5, 60, 0, -5, 60},
		{"no data", 0, 100, 50, 60, 0, 50, 60},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, cw := NewSendWindow(c.stream), NewSendWindow(c.conn)
			k := SpendData(&s, &cw, c.n, c.limit)
			if k != c.k || s.Avail() != c.streamLeft || cw.Avail() != c.connLeft {
				t.Fatalf("SpendData = %d, left %d and %d; want %d, left %d and %d", k, s.Avail(), cw.Avail(), c.k, c.streamLeft, c.connLeft)
			}
		})
	}
}

type testStream struct{ win SendWindow }

func testSendWindow(s *testStream) *SendWindow { return &s.win }

func TestShiftSendWindows(t *testing.T) {
	for _, c := range []struct {
		name      string
		windows   []int32
		old, size uint32
		want      []int32
		overflow  bool
	}{
		{"lowered", []int32{InitialWindow, 100}, InitialWindow, 0, []int32{0, 100 - InitialWindow}, false},
		{"raised", []int32{InitialWindow, 100}, InitialWindow, 1 << 20, []int32{1 << 20, 100 + 1<<20 - InitialWindow}, false},
		{"raised to the largest window", []int32{InitialWindow}, InitialWindow, MaxWindow, []int32{MaxWindow}, false},
		{"past it", []int32{InitialWindow + 1}, InitialWindow, MaxWindow, nil, true},
		{"no streams", nil, 0, MaxWindow, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			streams := map[uint32]*testStream{}
			for i, w := range c.windows {
				streams[uint32(2*i+1)] = &testStream{win: NewSendWindow(w)}
			}
			err := ShiftSendWindows(streams, testSendWindow, c.old, c.size)
			if c.overflow {
				var ce http2.ConnectionError
				if !errors.Is(err, ErrInitialWindowOverflow) || !errors.As(err, &ce) || http2.ErrCode(ce) != http2.ErrCodeFlowControl {
					t.Fatalf("err %v, want ErrInitialWindowOverflow, a FLOW_CONTROL_ERROR", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				if got := streams[uint32(2*i+1)].win.Avail(); got != w {
					t.Errorf("stream %d: window %d, want %d", 2*i+1, got, w)
				}
			}
		})
	}
}

func TestFlowControlErrors(t *testing.T) {
	for _, err := range []error{ErrConnWindowOverflow, ErrDataPastConnWindow, ErrInitialWindowOverflow} {
		var ce http2.ConnectionError
		if !errors.As(err, &ce) || http2.ErrCode(ce) != http2.ErrCodeFlowControl {
			t.Errorf("%v: not a FLOW_CONTROL_ERROR connection error", err)
		}
	}
}

func TestWriteWindowUpdates(t *testing.T) {
	type update struct{ id, inc uint32 }
	for _, c := range []struct {
		name                string
		connInc, id, strInc uint32
		want                []update
	}{
		{"none", 0, 3, 0, nil},
		{"connection", 100, 3, 0, []update{{0, 100}}},
		{"stream", 0, 3, 50, []update{{3, 50}}},
		{"both, connection first", 100, 5, 50, []update{{0, 100}, {5, 50}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteWindowUpdates(http2.NewFramer(&buf, nil), c.connInc, c.id, c.strInc); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(nil, &buf)
			var got []update
			for {
				f, err := fr.ReadFrame()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				wu := f.(*http2.WindowUpdateFrame)
				got = append(got, update{wu.StreamID, wu.Increment})
			}
			if len(got) != len(c.want) {
				t.Fatalf("updates %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("updates %v, want %v", got, c.want)
				}
			}
		})
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("write failed") }

func TestWriteWindowUpdatesError(t *testing.T) {
	for _, c := range []struct{ connInc, strInc uint32 }{{1, 0}, {0, 1}, {1, 1}} {
		if err := WriteWindowUpdates(http2.NewFramer(failWriter{}, nil), c.connInc, 1, c.strInc); err == nil {
			t.Errorf("increments %d and %d on a failing writer: no error", c.connInc, c.strInc)
		}
	}
}
