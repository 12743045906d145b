package idlewatch

import (
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// Watch is the process's epoll set of upstream HTTP/1.1 sockets (see
// state.go). Its own file descriptor is in the runtime's poller, so its
// goroutine runs when a socket of the set has news, in the scheduler's
// normal poll, without a thread of its own blocked in epoll_wait. A socket
// stays in the set for its life (the kernel drops it when it closes): the
// request path never calls epoll_ctl. The set and its goroutine exist
// while the watch has connections: the first one starts them, the last
// one's close stops them.
type Watch struct {
	log     *slog.Logger
	epoch   atomic.Uint64
	stopped atomic.Bool // the watch failed or closed: its connections are Peeked

	mu     sync.Mutex // guards the fields below
	run    *watchRun  // nil while no connection is watched
	conns  map[uint64]*Conn
	next   uint64
	closed bool
	runs   sync.WaitGroup // the runs' goroutines
}

// watchRun is one life of the epoll set and its goroutine.
type watchRun struct {
	file *os.File // the epoll set, in the runtime's poller
	epfd int      // file's descriptor (file.Fd would make it blocking)
	done bool     // closed (guarded by the watch's mu)
}

// New returns an idle watch; its epoll set starts with its first
// connection.
func New(log *slog.Logger) *Watch {
	w := &Watch{log: log, conns: map[uint64]*Conn{}}
	w.epoch.Store(2)
	return w
}

// startLocked creates the epoll set and its goroutine when none runs; it
// reports whether watching is available.
func (w *Watch) startLocked() bool {
	if w.run != nil {
		return true
	}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		w.log.Warn("idle upstream connections are checked on reuse: epoll_create1 failed", "error", err)
		return false
	}
	// Non-blocking: os.NewFile puts it in the runtime's poller.
	r := &watchRun{file: os.NewFile(uintptr(fd), "upstream-idle-watch"), epfd: fd}
	w.run = r
	w.runs.Add(1)
	go w.loop(r)
	return true
}

// Add adds the socket of nc (made by http1.WrapConn) to the set; nil
// when it can't (not a TCP socket, or no epoll).
func (w *Watch) Add(nc net.Conn) *Conn {
	wc := new(Conn)
	if !w.AddTo(nc, wc) {
		return nil
	}
	return wc
}

// AddTo is Add into wc, a zero Conn the caller keeps (embedded in its
// connection); false, leaving wc not watched, when it can't.
func (w *Watch) AddTo(nc net.Conn, wc *Conn) bool {
	if w == nil {
		return false
	}
	rc := http1.RawSyscallConn(nc)
	if rc == nil {
		return false
	}
	w.mu.Lock()
	var idle *watchRun
	defer func() {
		w.mu.Unlock()
		idle.close()
	}()
	if w.closed || !w.startLocked() {
		return false
	}
	w.next++
	id := w.next
	var addErr error
	err := rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{
			Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET,
			Fd:     int32(uint32(id)),
			Pad:    int32(uint32(id >> 32)),
		}
		addErr = unix.EpollCtl(w.run.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || addErr != nil {
		idle = w.stopIdleLocked()
		return false
	}
	if !http1.MarkReadsInto(nc, &wc.mark, &w.epoch) {
		return false // the socket is in the set: its events find no connection
	}
	wc.owner, wc.id, wc.stopped = w, id, &w.stopped
	w.conns[id] = wc
	return true
}

// forget removes a connection that is closing; the kernel removes its
// socket from the set when it closes. The last one stops the set.
func (w *Watch) forget(wc *Conn) {
	w.mu.Lock()
	delete(w.conns, wc.id)
	idle := w.stopIdleLocked()
	w.mu.Unlock()
	idle.close()
}

// stopIdleLocked detaches the set when it watches no connection; the
// caller closes it (close) once it let go of mu, which the set's goroutine
// may be waiting for (closing a file waits for its reader).
func (w *Watch) stopIdleLocked() *watchRun {
	r := w.run
	if r == nil || len(w.conns) != 0 {
		return nil
	}
	w.run = nil
	r.done = true
	return r
}

// close closes the set, which ends its goroutine's wait; nil does nothing.
func (r *watchRun) close() {
	if r != nil {
		r.file.Close()
	}
}

// loop collects the sockets of r's set that became readable or hung up
// whenever the set is readable, until the set closes.
func (w *Watch) loop(r *watchRun) {
	defer w.runs.Done()
	rc, err := r.file.SyscallConn()
	events := make([]unix.EpollEvent, 128)
	var collectErr error
	if err == nil {
		err = rc.Read(func(fd uintptr) bool {
			for {
				e := w.epoch.Add(1) // odd: collecting
				n, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
				if errno == 0 && n > 0 {
					w.mu.Lock()
					for _, ev := range events[:n] {
						if wc := w.conns[uint64(uint32(ev.Fd))|uint64(uint32(ev.Pad))<<32]; wc != nil {
							wc.heard.Store(e)
						}
					}
					w.mu.Unlock()
				}
				w.epoch.Add(1)
				if errno == syscall.EINTR {
					continue
				}
				if errno != 0 {
					collectErr = errno
					return true
				}
				if int(n) < len(events) {
					return false // all collected: wait for the set to be readable again
				}
			}
		})
	}
	if err == nil {
		err = collectErr
	}
	w.mu.Lock()
	if r.done {
		w.mu.Unlock()
		return // stopped (no connection left, or close)
	}
	// The set failed: its connections can no longer be told apart, for
	// good.
	w.log.Error("idle upstream connection watch stopped; idle connections are checked on reuse", "error", err)
	idle := w.stopLocked()
	w.mu.Unlock()
	idle.close()
}

// stopLocked makes the watch's connections fall back to a Peek for good,
// and detaches the set (see stopIdleLocked).
func (w *Watch) stopLocked() *watchRun {
	w.closed = true
	w.stopped.Store(true)
	clear(w.conns)
	return w.stopIdleLocked()
}

// Close stops the watch and waits for its goroutine. Connections it
// watched stay usable: their reuse is checked by a Peek.
func (w *Watch) Close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	idle := w.stopLocked()
	w.mu.Unlock()
	idle.close()
	w.runs.Wait()
}
