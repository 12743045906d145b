package filepages

import (
	"strings"
	"testing"
)

const smaps = `00400000-00fd0000 r-xp 00000000 08:01 123 /usr/local/bin/strait-proxy
Size:              12096 kB
Rss:                9000 kB
Anonymous:             0 kB
00fd0000-01f0b000 r--p 00bd0000 08:01 123 /usr/local/bin/strait-proxy
Size:              15596 kB
Anonymous:             0 kB
01f0b000-01fbc000 rw-p 01b0b000 08:01 123 /usr/local/bin/strait-proxy
Anonymous:           404 kB
02000000-02001000 r--p 00000000 08:01 124 /usr/local/bin/strait-proxy
Anonymous:             4 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Anonymous:          8192 kB
7f0000000000-7f0000020000 r-xp 00000000 08:01 200 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0000100000-7f0000101000 r--p 00000000 08:01 300 /tmp/a path with spaces
Anonymous:             0 kB
`

// Only the executable's read-only mappings whose pages are all the
// file's are released: not its writable data, not a read-only mapping
// with a copied-on-write page (relocated data), not the heap, not
// another file's mapping.
func TestReleasable(t *testing.T) {
	ms, err := parseSmaps(strings.NewReader(smaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 || ms[6].path != "/tmp/a path with spaces" {
		t.Fatalf("parsed %d mappings (%+v), want 7, the last one's path with its spaces", len(ms), ms)
	}
	got := releasable(ms, "/usr/local/bin/strait-proxy")
	if len(got) != 2 || got[0].start != 0x400000 || got[0].end != 0xfd0000 || got[1].start != 0xfd0000 || got[1].end != 0x1f0b000 {
		t.Fatalf("releasable = %+v, want the text and rodata mappings", got)
	}
	if got := releasable(ms, "/other"); len(got) != 0 {
		t.Fatalf("releasable for another executable = %+v, want none", got)
	}
}
