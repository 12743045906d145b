package listener

import (
	"net"
	"sort"
)

// Held listening, as Envoy's server starts its workers (source/server/
// server.cc, InstanceBase::startWorkers, after the init manager is done;
// ListenSocketFactoryImpl::doFinalPreWorkerInit calls listen()): with
// Options.Held, the listeners of the start-up, static and dynamic, bind
// their sockets (an address in use still fails the update) but do not
// listen, so a client's connect is refused, until StartListening. Off
// Linux, where sockets cannot be reserved, they listen at once.

// holdLocked binds, without listening, the socket of b: the reservation it
// made while warming when there is one for its address, else a new one.
// nil when reservations are not available.
func (m *Manager) holdLocked(b *Listener) (*reservation, error) {
	if r := m.reserved[b.Name]; r != nil {
		delete(m.reserved, b.Name)
		if r.addr == b.Addr && r.transparent == b.Transparent {
			return r, nil
		}
		r.close()
	}
	return reserve(b.Addr, b.Transparent)
}

// StartListening makes the held sockets listen and accept, and every
// socket bound from now on listen at once. A socket that cannot listen is
// dropped and counted as listener_create_failure.
func (m *Manager) StartListening() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held || m.closed {
		return
	}
	m.held = false
	names := make([]string, 0, len(m.sockets))
	for name := range m.sockets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := m.sockets[name]
		if s.held == nil {
			continue
		}
		ln, err := s.held.listen()
		s.held = nil
		if err != nil {
			delete(m.sockets, name)
			m.createFailure.Add(1)
			m.log.Error("listener could not listen; dropped", "listener", name, "error", err)
			continue
		}
		s.ln = ln
		m.startAcceptingLocked(name, s)
	}
}

// startAcceptingLocked starts the accept loops of s, a listening socket.
func (m *Manager) startAcceptingLocked(name string, s *socket) {
	m.log.Info("listening", "listener", name, "address", s.ln.Addr().String())
	for range m.opts.Workers {
		m.loops.Add(1)
		go func() {
			defer m.loops.Done()
			m.acceptLoop(s)
		}()
	}
}

// addr is the socket's bound address (with the port the kernel chose for
// port 0).
func (s *socket) addr() net.Addr {
	if s.ln != nil {
		return s.ln.Addr()
	}
	return s.held.boundAddr()
}
