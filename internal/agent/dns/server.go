// Package dns is the agent's DNS proxy, Istio's pilot-agent local DNS
// server (pkg/dns/client LocalDNSServer) in our own code: with DNS capture
// the pod's queries to port 53 are redirected to it (127.0.0.1:15053, UDP
// and TCP). It answers A and AAAA queries for the mesh's names from the
// NDS name table that straitd sends, and forwards every other query to the
// pod's resolvers from /etc/resolv.conf, passing their answers (NXDOMAIN,
// SERVFAIL included) back unchanged.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/straitmesh/strait/internal/nds"
)

// Defaults, as Istio's agent has them.
const (
	DefaultAddr    = "127.0.0.1:15053"
	DefaultTimeout = 5 * time.Second
	// answerTTL is the TTL of answers from the name table (Istio: 30s).
	answerTTL = 30
)

// Options configure a Server.
type Options struct {
	Logger *slog.Logger
	// Addr is the UDP and TCP listen address (default DefaultAddr).
	Addr string
	// Namespace is the pod's namespace: its services also answer to their
	// bare name.
	Namespace string
	// ClusterDomain is the cluster's DNS domain (e.g. "cluster.local"):
	// only Kubernetes services under svc.ClusterDomain get short names.
	ClusterDomain string
	// Search are the pod's search domains (resolv.conf "search").
	Search []string
	// Upstreams are the resolvers queries are forwarded to, as host:port,
	// tried in order.
	Upstreams []string
	// Timeout bounds one forwarded exchange (default DefaultTimeout).
	Timeout time.Duration
	// Dial connects to an upstream; ListenPacket and Listen open the
	// server's UDP and TCP sockets. The defaults are package net's; tests
	// open them in a network namespace as the proxy's user.
	Dial         func(ctx context.Context, network, addr string) (net.Conn, error)
	ListenPacket func(network, addr string) (net.PacketConn, error)
	Listen       func(network, addr string) (net.Listener, error)
}

// Server is the DNS proxy. Create it with New, start it with Run.
type Server struct {
	// Set at creation, read-only.
	log       *slog.Logger
	opts      Options
	search    []string // lower-case FQDNs
	ready     chan struct{}
	readyOnce sync.Once
	// table is replaced whole by UpdateNameTable.
	table atomic.Pointer[table]

	// mu guards addrs, set once Run listens.
	mu    sync.Mutex
	addrs []net.Addr
	bound chan struct{}
}

// New checks opts and returns a Server that answers from an empty table
// until the first UpdateNameTable.
func New(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if len(opts.Upstreams) == 0 {
		return nil, errors.New("dns proxy: no upstream resolver (resolv.conf has no nameserver line; add one)")
	}
	for _, u := range opts.Upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return nil, fmt.Errorf("dns proxy: upstream %q is not host:port: %w", u, err)
		}
	}
	if opts.Dial == nil {
		opts.Dial = (&net.Dialer{}).DialContext
	}
	if opts.ListenPacket == nil {
		opts.ListenPacket = net.ListenPacket
	}
	if opts.Listen == nil {
		opts.Listen = net.Listen
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		log:   log.With("component", "dns"),
		opts:  opts,
		ready: make(chan struct{}),
		bound: make(chan struct{}),
	}
	for _, d := range opts.Search {
		if d = strings.Trim(strings.ToLower(d), "."); d != "" {
			s.search = append(s.search, d+".")
		}
	}
	s.table.Store(&table{names: map[string]*host{}})
	return s, nil
}

// UpdateNameTable replaces the names the server answers.
func (s *Server) UpdateNameTable(nt nds.NameTable) {
	s.table.Store(buildTable(nt, s.opts.Namespace, s.opts.ClusterDomain))
	s.readyOnce.Do(func() { close(s.ready) })
	s.log.Info("name table updated", "hosts", len(nt))
}

// Ready is closed once the first name table has arrived.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addrs returns the UDP and TCP addresses Run listens on, waiting until it
// does or ctx ends.
func (s *Server) Addrs(ctx context.Context) (udp, tcp net.Addr, err error) {
	select {
	case <-s.bound:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[0], s.addrs[1], nil
}

// listen opens the UDP socket and the TCP listener on one port. With port
// 0, the TCP port is the one the UDP socket got, which a TCP socket may
// already hold: then both are opened again on another port.
func (s *Server) listen() (net.PacketConn, net.Listener, error) {
	for try := 0; ; try++ {
		pc, err := s.opts.ListenPacket("udp", s.opts.Addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns proxy: listen udp %s: %w", s.opts.Addr, err)
		}
		tcpAddr := s.opts.Addr
		anyPort := strings.HasSuffix(tcpAddr, ":0")
		if anyPort {
			// Share the port the UDP socket got.
			tcpAddr = pc.LocalAddr().String()
		}
		ln, err := s.opts.Listen("tcp", tcpAddr)
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if !anyPort || !errors.Is(err, syscall.EADDRINUSE) || try == 9 {
			return nil, nil, fmt.Errorf("dns proxy: listen tcp %s: %w", tcpAddr, err)
		}
	}
}

// Run serves UDP and TCP until ctx is done; it returns an error if it
// cannot listen or a listener fails.
func (s *Server) Run(ctx context.Context) error {
	pc, ln, err := s.listen()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.addrs = []net.Addr{pc.LocalAddr(), ln.Addr()}
	s.mu.Unlock()
	close(s.bound)
	s.log.Info("serving dns", "udp", pc.LocalAddr().String(), "tcp", ln.Addr().String(), "upstreams", s.opts.Upstreams)

	udpSrv := &mdns.Server{PacketConn: pc, Handler: s.handler(ctx, "udp")}
	tcpSrv := &mdns.Server{Listener: ln, Handler: s.handler(ctx, "tcp")}
	errc := make(chan error, 2)
	go func() { errc <- udpSrv.ActivateAndServe() }()
	go func() { errc <- tcpSrv.ActivateAndServe() }()
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
		first = fmt.Errorf("dns proxy: %w", first)
	}
	// Shutdown fails for a server that already stopped; close the sockets too.
	_ = udpSrv.Shutdown()
	_ = tcpSrv.Shutdown()
	pc.Close()
	ln.Close()
	if first == nil {
		_ = <-errc // the other server's end, after the shutdown
	}
	_ = <-errc
	return first
}

func (s *Server) handler(ctx context.Context, network string) mdns.Handler {
	return mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		resp := s.answer(ctx, req, network)
		if network == "udp" {
			size := mdns.MinMsgSize
			if o := req.IsEdns0(); o != nil && int(o.UDPSize()) > size {
				size = int(o.UDPSize())
			}
			resp.Truncate(size)
		}
		if err := w.WriteMsg(resp); err != nil {
			s.log.Debug("write dns answer", "error", err)
		}
	})
}

// answer answers req from the name table or forwards it over network.
func (s *Server) answer(ctx context.Context, req *mdns.Msg, network string) *mdns.Msg {
	if len(req.Question) != 1 {
		m := new(mdns.Msg)
		m.SetRcode(req, mdns.RcodeFormatError)
		return m
	}
	q := req.Question[0]
	if q.Qclass == mdns.ClassINET && (q.Qtype == mdns.TypeA || q.Qtype == mdns.TypeAAAA) {
		if h, alias := s.table.Load().lookup(q.Name, s.search); h != nil {
			return localAnswer(req, h, alias)
		}
	}
	return s.forward(ctx, req, network)
}

// localAnswer answers an A or AAAA question for h. A name with no address
// of the asked family gets an empty NOERROR answer, so the resolver does
// not go on to the search domains.
func localAnswer(req *mdns.Msg, h *host, alias bool) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.RecursionAvailable = true
	q := req.Question[0]
	owner := q.Name
	if alias {
		m.Answer = append(m.Answer, &mdns.CNAME{
			Hdr:    mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeCNAME, Class: mdns.ClassINET, Ttl: answerTTL},
			Target: h.canonical,
		})
		owner = h.canonical
	}
	if q.Qtype == mdns.TypeA {
		for _, a := range h.v4 {
			m.Answer = append(m.Answer, &mdns.A{
				Hdr: mdns.RR_Header{Name: owner, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: answerTTL},
				A:   a.AsSlice(),
			})
		}
	} else {
		for _, a := range h.v6 {
			m.Answer = append(m.Answer, &mdns.AAAA{
				Hdr:  mdns.RR_Header{Name: owner, Rrtype: mdns.TypeAAAA, Class: mdns.ClassINET, Ttl: answerTTL},
				AAAA: a.AsSlice(),
			})
		}
	}
	return m
}

// forward sends req to the upstreams in order and returns the first answer
// (whatever its rcode); SERVFAIL when none answers.
func (s *Server) forward(ctx context.Context, req *mdns.Msg, network string) *mdns.Msg {
	for _, u := range s.opts.Upstreams {
		resp, err := s.exchange(ctx, req, network, u)
		if err == nil {
			return resp
		}
		s.log.Debug("upstream failed", "upstream", u, "name", req.Question[0].Name, "error", err)
	}
	m := new(mdns.Msg)
	m.SetRcode(req, mdns.RcodeServerFailure)
	return m
}

// exchange asks one upstream over network, within the timeout.
func (s *Server) exchange(ctx context.Context, req *mdns.Msg, network, upstream string) (*mdns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	c, err := s.opts.Dial(ctx, network, upstream)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	co := &mdns.Conn{Conn: c}
	if network == "udp" {
		// Read as much as the client said it takes.
		co.UDPSize = mdns.MinMsgSize
		if o := req.IsEdns0(); o != nil {
			co.UDPSize = max(o.UDPSize(), mdns.MinMsgSize)
		}
	}
	if err := co.WriteMsg(req); err != nil {
		return nil, err
	}
	for {
		resp, err := co.ReadMsg()
		if err != nil {
			return nil, err
		}
		if resp.Id == req.Id {
			return resp, nil
		}
		// A late answer to an earlier query on a reused port: skip it.
	}
}

// ResolvConf is what the proxy needs from a resolv.conf.
type ResolvConf struct {
	// Servers are the nameservers as host:port (port 53 unless given).
	Servers []string
	Search  []string
}

// ReadResolvConf reads the nameservers and search domains of a
// resolv.conf.
func ReadResolvConf(path string) (ResolvConf, error) {
	cc, err := mdns.ClientConfigFromFile(path)
	if err != nil {
		return ResolvConf{}, fmt.Errorf("read %s: %w", path, err)
	}
	rc := ResolvConf{Search: cc.Search}
	for _, srv := range cc.Servers {
		rc.Servers = append(rc.Servers, net.JoinHostPort(srv, cc.Port))
	}
	return rc, nil
}
