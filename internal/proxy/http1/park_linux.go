package http1

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RawConner is a connection wrapper that can hand out the connection it
// wraps when reading it directly is safe (nothing of its own is buffered).
// RawSyscallConn looks through such wrappers.
type RawConner interface {
	RawConn() net.Conn // nil while the wrapper holds unread bytes
}

// RawSyscallConn returns the syscall.RawConn of the TCP socket under c (a
// connection made by WrapConn, possibly inside a DeadlineConn or a
// RawConner), or nil when there is none or a wrapper still buffers bytes.
func RawSyscallConn(c net.Conn) syscall.RawConn {
	if r := unwrapRaw(c); r != nil {
		return r.rc
	}
	return nil
}

// unwrapRaw finds the connection made by WrapConn under c's wrappers.
func unwrapRaw(c net.Conn) *rawConn {
	for c != nil {
		switch w := c.(type) {
		case *rawConn:
			return w
		case *DeadlineConn:
			c = w.Conn
		case RawConner:
			c = w.RawConn()
		default:
			return nil
		}
	}
	return nil
}

// Parker holds parked connections (see park.go) in an epoll set of
// its own, level-triggered and one-shot: a socket already registered with
// the runtime's netpoller can be in a second epoll set, and the runtime's
// edge-triggered registration is not disturbed (its next Read just finds the
// data). Its goroutine starts with the first parked connection; Close stops
// it.
type Parker struct {
	log *slog.Logger

	startOnce sync.Once
	epfd      int // set by start, read-only after; -1: parking unavailable
	wakefd    int // eventfd that tells loop to stop
	done      chan struct{}

	mu        sync.Mutex // guards conns, next, closed, deadlines, timer, timerAt and each parked slot's deadline and fd
	conns     map[uint64]*ParkSlot
	next      uint64
	closed    bool
	deadlines parkDeadlines // the parked connections with a deadline
	timer     *time.Timer   // fires at timerAt, the first deadline when it was set
	timerAt   int64
	trim      trimState // park_trim_linux.go
}

// NewParker returns a Parker that logs what stops parking to log.
func NewParker(log *slog.Logger) *Parker {
	return &Parker{log: log, epfd: -1, conns: map[uint64]*ParkSlot{}, done: make(chan struct{})}
}

// start creates the epoll set and its goroutine once; it reports whether
// parking is available.
func (p *Parker) start() bool {
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

// Park registers c (socket nc, slot s), whose goroutine is about to end,
// until its socket is readable (c.Resume) or deadline (zero: none) passes
// (c.Finish). The connection is detached from the runtime: the Parker
// keeps a duplicate of the socket's descriptor, which the slot owns, and
// Park closes nc, so that no net.Conn, netpoller descriptor or wrapper
// lives while the connection is parked. When it reports true, c belongs to
// the Parker: the caller must not touch it or nc again; on false nc is
// still open and the caller's. Whoever takes c back (Resume, Finish, Take)
// owns the descriptor: ResumeConn makes a connection of it, CloseFD closes
// it.
func (p *Parker) Park(s *ParkSlot, nc net.Conn, c Parked, deadline time.Time) bool {
	rc := RawSyscallConn(nc)
	if rc == nil || !p.start() {
		return false
	}
	if !p.register(s, rc, c, deadline) {
		return false
	}
	// The duplicate keeps the socket open (close(2) of one descriptor
	// sends nothing while another refers to the socket).
	_ = nc.Close()
	return true
}

// register duplicates rc's descriptor into s and adds it to the epoll set.
func (p *Parker) register(s *ParkSlot, rc syscall.RawConn, c Parked, deadline time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.next++
	id := p.next
	var addErr error
	err := rc.Control(func(fd uintptr) {
		dup, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			addErr = err
			return
		}
		ev := unix.EpollEvent{
			Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
			Fd:     int32(uint32(id)),
			Pad:    int32(uint32(id >> 32)),
		}
		if addErr = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, dup, &ev); addErr != nil {
			unix.Close(dup)
			return
		}
		s.fd, s.held = dup, true
	})
	if err != nil || addErr != nil {
		return false // closed meanwhile (drain), or out of descriptors: the caller closes it
	}
	s.conn = c
	p.conns[id] = s
	s.id.Store(id)
	p.parkedLocked()
	s.hidx = -1
	if !deadline.IsZero() {
		s.deadline = deadline.UnixNano()
		if p.deadlines.push(s) && (p.timerAt == 0 || s.deadline < p.timerAt) {
			p.armLocked(s.deadline)
		}
	}
	return true
}

// ResumeConn makes a connection of the descriptor of a connection taken
// back from the Parker (Resume, or Take reporting true), which it then
// owns no more (closed on error too). The connection is the same socket,
// registered with the runtime's netpoller again.
func (s *ParkSlot) ResumeConn() (net.Conn, error) {
	fd := s.fd
	if !s.held {
		return nil, errors.New("resume a parked connection: no descriptor")
	}
	s.held = false
	f := os.NewFile(uintptr(fd), "parked")
	nc, err := net.FileConn(f) // a duplicate of fd
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("resume a parked connection: %w", err)
	}
	return nc, nil
}

// CloseFD closes the descriptor of a connection taken back from the Parker
// (Finish, or Take reporting true) that ends.
func (s *ParkSlot) CloseFD() {
	if s.held {
		unix.Close(s.fd)
		s.held = false
	}
}

// armLocked sets the timer to fire at at (Unix nanoseconds).
func (p *Parker) armLocked(at int64) {
	p.timerAt = at
	d := time.Until(time.Unix(0, at))
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.expire)
		return
	}
	p.timer.Reset(d)
}

// expire finishes the parked connections whose deadline has passed, and
// sets the timer for the next.
func (p *Parker) expire() {
	now := time.Now().UnixNano()
	var due []*ParkSlot
	p.mu.Lock()
	for {
		s := p.deadlines.first()
		if s == nil {
			p.timerAt = 0
			break
		}
		if s.deadline > now {
			p.armLocked(s.deadline)
			break
		}
		if p.takeLocked(s.id.Load()) != s {
			p.deadlines.remove(s) // not parked (cannot happen: takeLocked removes it)
			continue
		}
		due = append(due, s)
	}
	p.mu.Unlock()
	for _, s := range due {
		s.conn.Finish()
	}
}

// Take removes the connection of slot s from the Parker; it reports whether
// it was parked, in which case the caller now owns it again.
func (p *Parker) Take(s *ParkSlot) bool {
	id := s.id.Load()
	if id == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked(id) == s
}

func (p *Parker) takeLocked(id uint64) *ParkSlot {
	s := p.conns[id]
	if s == nil {
		return nil
	}
	delete(p.conns, id)
	s.id.Store(0)
	p.deadlines.remove(s)
	s.deadline = 0
	// The descriptor is the slot's own (only its owner closes it, after
	// this), so its number is still the socket's.
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
	return s
}

// loop resumes connections that became readable, each on a new goroutine.
func (p *Parker) loop() {
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
			if s := p.takeLocked(id); s != nil {
				go s.conn.Resume()
			}
		}
		p.mu.Unlock()
	}
}

// Close stops parking and finishes every parked connection. It waits for
// the Parker's goroutine.
func (p *Parker) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.trim.timer != nil {
		p.trim.timer.Stop()
	}
	var parked []*ParkSlot
	for id := range p.conns {
		parked = append(parked, p.takeLocked(id))
	}
	p.mu.Unlock()
	for _, s := range parked {
		s.conn.Finish()
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
