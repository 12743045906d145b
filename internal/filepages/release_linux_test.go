package filepages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB is the RssFile of /proc/self/status.
func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("RssFile %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// The real thing: this test binary's resident file pages drop, and the
// process goes on running code from the released pages.
func TestReleaseLowersRssFile(t *testing.T) {
	before := rssFileKiB(t)
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	if n == 0 || after >= before {
		t.Fatalf("released %d bytes; RssFile %d -> %d kB, want it lower", n, before, after)
	}
	if _, err := parseSmaps(strings.NewReader(smaps)); err != nil { // code on the released pages
		t.Fatal(err)
	}
	t.Logf("released %d KiB of mappings; RssFile %d -> %d kB", n>>10, before, after)
}
