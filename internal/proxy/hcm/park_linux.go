package hcm

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// parker holds parked HTTP/1.1 connections (see park.go) in an epoll set of
// its own, level-triggered and one-shot: a socket already registered with
// the runtime's netpoller can be in a second epoll set, and the runtime's
// edge-triggered registration is not disturbed (its next Read just finds the
// data). Its goroutine starts with the first parked connection; Close stops
// it.
type parker struct {
	log *slog.Logger

	startOnce sync.Once
	epfd      int // set by start, read-only after; -1: parking unavailable
	wakefd    int // eventfd that tells loop to stop
	done      chan struct{}

	mu     sync.Mutex // guards conns, next, closed and each parked h1conn's parkTimer and parkFD
	conns  map[uint64]*h1conn
	next   uint64
	closed bool
}

func newParker(log *slog.Logger) *parker {
	return &parker{log: log, epfd: -1, conns: map[uint64]*h1conn{}, done: make(chan struct{})}
}

// start creates the epoll set and its goroutine once; it reports whether
// parking is available.
func (p *parker) start() bool {
	p.startOnce.Do(func() {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			p.log.Warn("idle connections cannot be parked: epoll_create1 failed", "error", err)
			close(p.done)
			return
		}
		wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err == nil {
			ev := unix.EpollEvent{Events: unix.EPOLLIN} // id 0: the wake-up
			err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &ev)
			if err != nil {
				unix.Close(wfd)
			}
		}
		if err != nil {
			unix.Close(epfd)
			p.log.Warn("idle connections cannot be parked: eventfd failed", "error", err)
			close(p.done)
			return
		}
		p.epfd, p.wakefd = epfd, wfd
		go p.loop()
	})
	return p.epfd >= 0
}

// park registers c, whose goroutine is about to end, until its socket is
// readable or deadline (zero: none) passes. When it reports true, c belongs
// to the parker: the caller must not touch it again.
func (p *parker) park(c *h1conn, deadline time.Time) bool {
	rc := http1.RawSyscallConn(c.nc)
	if rc == nil || !p.start() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.next++
	id := p.next
	var addErr error
	err := rc.Control(func(fd uintptr) {
		c.parkFD = int(fd)
		ev := unix.EpollEvent{
			Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
			Fd:     int32(uint32(id)),
			Pad:    int32(uint32(id >> 32)),
		}
		addErr = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || addErr != nil {
		return false // closed meanwhile (drain): the caller closes it
	}
	p.conns[id] = c
	c.parkID.Store(id)
	if !deadline.IsZero() {
		if c.parkTimer == nil {
			c.parkTimer = time.AfterFunc(time.Until(deadline), c.parkExpired)
		} else {
			c.parkTimer.Reset(time.Until(deadline))
		}
	}
	return true
}

// take removes c from the parker; it reports whether c was parked, in which
// case the caller now owns c.
func (p *parker) take(c *h1conn) bool {
	id := c.parkID.Load()
	if id == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked(id) == c
}

func (p *parker) takeLocked(id uint64) *h1conn {
	c := p.conns[id]
	if c == nil {
		return nil
	}
	delete(p.conns, id)
	c.parkID.Store(0)
	if c.parkTimer != nil {
		c.parkTimer.Stop()
	}
	// The socket is still open (only c's owner closes it), so its number
	// is still its own.
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, c.parkFD, nil)
	return c
}

// loop resumes connections that became readable, each on a new goroutine.
func (p *parker) loop() {
	defer close(p.done)
	defer unix.Close(p.epfd)
	defer unix.Close(p.wakefd)
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			p.log.Error("epoll_wait on parked connections failed; they close at their idle timeout", "error", err)
			return
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				p.mu.Unlock()
				return
			}
			if c := p.takeLocked(id); c != nil {
				go c.run(true)
			}
		}
		p.mu.Unlock()
	}
}

// close stops parking and ends every parked connection. It waits for the
// parker's goroutine.
func (p *parker) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.closed = true
	var parked []*h1conn
	for id := range p.conns {
		parked = append(parked, p.takeLocked(id))
	}
	p.mu.Unlock()
	for _, c := range parked {
		c.finish()
	}
	started := true
	p.startOnce.Do(func() { started = false; close(p.done) }) // never start now
	if started && p.epfd >= 0 {
		var one [8]byte
		one[0] = 1
		if _, err := unix.Write(p.wakefd, one[:]); err != nil {
			p.log.Error("wake the parker to stop", "error", err)
			return
		}
	}
	<-p.done
}
