package wire

import (
	"bytes"
	"strconv"
	"testing"

	"golang.org/x/net/http2"
)

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

func TestCanonCache(t *testing.T) {
	var c CanonCache
	for _, tc := range []struct{ in, want string }{
		{"content-type", "Content-Type"}, {"x-request-id", "X-Request-Id"}, {"te", "Te"}, {"content-type", "Content-Type"},
	} {
		if got := c.Canonical(tc.in); got != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if len(c.m) != 3 {
		t.Fatalf("%d names kept, want 3", len(c.m))
	}
	for i := range 2 * maxLowered {
		name := "x-h-" + strconv.Itoa(i)
		if got := c.Canonical(name); got != "X-H-"+strconv.Itoa(i) {
			t.Fatalf("Canonical(%q) = %q", name, got)
		}
	}
	if len(c.m) != maxLowered {
		t.Fatalf("%d names kept, want the bound %d", len(c.m), maxLowered)
	}
	c.Reset()
	if c.m != nil {
		t.Fatal("Reset kept the names")
	}
	if got := c.Canonical("accept"); got != "Accept" || len(c.m) != 1 {
		t.Fatalf("after Reset: %q, %d names", got, len(c.m))
	}
}
