package proxy

import (
	"runtime/debug"
	"sync"
	"time"
)

// releaseQuiet is how long the configuration must stay unchanged before
// the proxy returns its free heap pages to the OS.
const releaseQuiet = 2 * time.Second

// memoryReleaser returns the heap's free pages to the OS once the
// configuration has stopped changing. Applying a configuration decodes
// and builds far more than it keeps (a sidecar with 1,000 services in
// scope keeps ~25 MiB of a start-up that peaks near twice that), and
// the runtime's background scavenger gives the difference back only
// slowly, so an idle proxy would hold it for minutes. One forced
// collection per quiet period costs a few milliseconds of CPU; the
// request path does not change. Envoy does the same after xDS updates
// with tcmalloc (source/common/memory/utils.cc, Utils::tryShrinkHeap:
// "release the cache introduced by tcmalloc, mainly in xDS config
// updates").
type memoryReleaser struct {
	quiet   time.Duration
	release func() // debug.FreeOSMemory, or a test's recorder

	mu     sync.Mutex // guards timer and closed
	timer  *time.Timer
	closed bool
}

func newMemoryReleaser() *memoryReleaser {
	return &memoryReleaser{quiet: releaseQuiet, release: debug.FreeOSMemory}
}

// changed records a configuration change: the release happens quiet
// after the last one.
func (r *memoryReleaser) changed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(r.quiet, r.release)
		return
	}
	r.timer.Reset(r.quiet)
}

// stop cancels a pending release.
func (r *memoryReleaser) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
}
