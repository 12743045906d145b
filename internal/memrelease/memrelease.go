// Package memrelease returns a process's free heap pages to the OS once
// its configuration has stopped changing: strait-proxy after xDS updates,
// strait-agent after relaying them.
//
// Applying (or relaying) a configuration allocates far more than it keeps
// (a sidecar with 1,000 services in scope keeps ~25 MiB of a start-up
// that peaks near twice that; gRPC keeps the buffers of the largest
// responses in its pools), and the Go runtime's background scavenger
// gives the difference back only slowly, so an idle sidecar would hold it
// for minutes (bench/sidecar has the figures). Envoy does the same after
// xDS updates with tcmalloc (source/common/memory/utils.cc,
// Utils::tryShrinkHeap: "release the cache introduced by tcmalloc, mainly
// in xDS config updates").
package memrelease

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// DefaultQuiet is how long the configuration must stay unchanged before
// the release.
const DefaultQuiet = 2 * time.Second

// Releaser releases once per quiet period after changes. Safe for
// concurrent use.
type Releaser struct {
	// Set at creation, read-only.
	quiet   time.Duration
	release func()

	mu     sync.Mutex // guards timer and closed
	timer  *time.Timer
	closed bool
}

// New returns a Releaser that releases DefaultQuiet after the last change.
func New() *Releaser {
	return &Releaser{quiet: DefaultQuiet, release: release}
}

// release runs two collections, so that sync.Pool contents (gRPC's
// receive buffers), which survive one collection in the pools' victim
// cache, are freed too, then returns the free pages. Two forced
// collections per quiet period cost a few milliseconds of CPU; the
// request path does not change.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// Changed records a configuration change: the release happens the quiet
// period after the last one.
func (r *Releaser) Changed() {
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

// Stop cancels a pending release; later changes release nothing.
func (r *Releaser) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
}
