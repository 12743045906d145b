package wire

import (
	"bytes"
	"strconv"
	"testing"

	"golang.org/x/net/http2"
)

func TestRecvWindow(t *testing.T) {
	w := NewRecvWindow(100, 40)
	if !w.Take(60) || w.Avail() != 40 {
		t.Fatalf("Take(60): avail %d, want 40", w.Avail())
	}
	if w.Take(41) {
		t.Fatal("Take(41) with 40 left: accepted, want refused")
	}
	if w.Avail() != 40 {
		t.Fatalf("a refused Take counted: avail %d", w.Avail())
	}
	if inc := w.Return(39); inc != 0 {
		t.Fatalf("Return(39) under the threshold 40: increment %d, want 0", inc)
	}
	if inc := w.Return(1); inc != 40 || w.Avail() != 80 {
		t.Fatalf("Return reaching the threshold: increment %d avail %d, want 40 and 80", inc, w.Avail())
	}
	if inc := w.Return(5); inc != 0 {
		t.Fatalf("after an update the count starts again: increment %d", inc)
	}
	// A threshold above a MiB still gives back every MiB.
	big := NewRecvWindow(16<<20, 8<<20)
	if !big.Take(2 << 20) {
		t.Fatal("Take(2 MiB) of 16 MiB refused")
	}
	if inc := big.Return(1<<20 - 1); inc != 0 {
		t.Fatalf("under a MiB: increment %d", inc)
	}
	if inc := big.Return(1); inc != 1<<20 {
		t.Fatalf("a MiB gathered: increment %d, want %d", inc, 1<<20)
	}
}

func TestWriteHeaderBlock(t *testing.T) {
	for _, c := range []struct {
		size, maxFrame int
		frames         int
		endStream      bool
	}{
		{0, 16, 1, true}, {10, 16, 1, false}, {16, 16, 1, false}, {17, 16, 2, true}, {100, 16, 7, false},
	} {
		t.Run(strconv.Itoa(c.size), func(t *testing.T) {
			block := bytes.Repeat([]byte{'h'}, c.size)
			for i := range block {
				block[i] = byte(i)
			}
			var buf bytes.Buffer
			if err := WriteHeaderBlock(http2.NewFramer(&buf, nil), 3, block, c.maxFrame, c.endStream); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(nil, &buf)
			var got []byte
			for i := 0; ; i++ {
				f, err := fr.ReadFrame()
				if err != nil {
					if i != c.frames {
						t.Fatalf("%d frames, want %d (%v)", i, c.frames, err)
					}
					break
				}
				if f.Header().StreamID != 3 || int(f.Header().Length) > c.maxFrame {
					t.Fatalf("frame %d: %+v", i, f.Header())
				}
				last := i == c.frames-1
				switch f := f.(type) {
				case *http2.HeadersFrame:
					if i != 0 || f.HeadersEnded() != last || f.StreamEnded() != c.endStream {
						t.Fatalf("HEADERS as frame %d: ended %v stream %v", i, f.HeadersEnded(), f.StreamEnded())
					}
					got = append(got, f.HeaderBlockFragment()...)
				case *http2.ContinuationFrame:
					if i == 0 || f.HeadersEnded() != last {
						t.Fatalf("CONTINUATION as frame %d: ended %v", i, f.HeadersEnded())
					}
					got = append(got, f.HeaderBlockFragment()...)
				default:
					t.Fatalf("frame %d: %T", i, f)
				}
			}
			if !bytes.Equal(got, block) {
				t.Fatalf("fragments join to %v, want %v", got, block)
			}
		})
	}
}

func TestLowerCache(t *testing.T) {
	var c LowerCache
	if got := c.Lower("Content-Type"); got != "content-type" {
		t.Fatalf("Lower = %q", got)
	}
	for i := range 2 * maxLowered {
		if got := c.Lower("X-H" + strconv.Itoa(i)); got != "x-h"+strconv.Itoa(i) {
			t.Fatalf("Lower = %q", got)
		}
	}
	if len(c.m) != maxLowered {
		t.Fatalf("cache holds %d names, want its bound %d", len(c.m), maxLowered)
	}
}
