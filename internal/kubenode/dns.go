package kubenode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// ClusterDomain is the node's cluster domain: the kubelet's clusterDomain,
// and the zone the node's DNS server answers for.
const ClusterDomain = "cluster.local"

// dnsTTL is the TTL of every answer, short so that a test sees a changed
// Service soon (CoreDNS's kubernetes plugin also defaults to 5 s).
const dnsTTL = 5

// DNSOptions configure NewClusterDNS.
type DNSOptions struct {
	// Client reads Services and EndpointSlices.
	Client kubernetes.Interface
	// Addr is the host:port the server listens on, UDP and TCP. Port 0
	// picks one port free for both.
	Addr string
	// Domain is the cluster domain; empty means ClusterDomain.
	Domain string
	// Logger gets one debug line per query and the server's errors; nil
	// discards.
	Logger *slog.Logger
}

// ClusterDNS is the node's cluster DNS server, the part of CoreDNS's
// kubernetes plugin a test cluster needs: in the cluster domain it answers
// A and AAAA for <service>.<namespace>.svc.<domain> with the Service's
// ClusterIPs (a headless Service: its ready endpoints' addresses, and
// <hostname>.<service>.<namespace>.svc.<domain> for an endpoint with a
// hostname), a CNAME for an ExternalName Service, and NXDOMAIN for any
// other name. Names outside the domain are REFUSED: there is no upstream,
// and nothing is forwarded off the machine.
//
// Lookups read the informers' caches (safe from the server's concurrent
// handler goroutines); the struct's fields are set by NewClusterDNS and
// read-only afterwards.
type ClusterDNS struct {
	domain   string // lower-case FQDN, "cluster.local."
	log      *slog.Logger
	factory  informers.SharedInformerFactory
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	udp, tcp *dns.Server
	ready    chan struct{} // closed once the caches synced and both servers serve
}

// NewClusterDNS binds the server's UDP and TCP sockets on opts.Addr; Run
// serves them.
func NewClusterDNS(opts DNSOptions) (*ClusterDNS, error) {
	if opts.Client == nil {
		return nil, errors.New("cluster DNS: DNSOptions.Client is nil; give it a clientset to read Services from")
	}
	domain := opts.Domain
	if domain == "" {
		domain = ClusterDomain
	}
	if _, ok := dns.IsDomainName(domain); !ok || strings.Trim(domain, ".") == "" {
		return nil, fmt.Errorf("cluster DNS: DNSOptions.Domain %q is not a domain name (e.g. %q)", opts.Domain, ClusterDomain)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pc, ln, err := listenDNS(opts.Addr)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(opts.Client, 0)
	d := &ClusterDNS{
		domain:   dns.CanonicalName(domain),
		log:      log.With("component", "cluster-dns"),
		factory:  factory,
		services: factory.Core().V1().Services().Lister(),
		slices:   factory.Discovery().V1().EndpointSlices().Lister(),
		ready:    make(chan struct{}),
	}
	d.udp = &dns.Server{PacketConn: pc, Handler: d}
	d.tcp = &dns.Server{Listener: ln, Handler: d}
	return d, nil
}

// listenDNS binds UDP and TCP on the same address; with port 0, a port
// free for both.
func listenDNS(addr string) (net.PacketConn, net.Listener, error) {
	for range 10 {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster DNS: listen on udp %s (is another DNS server bound to port 53 on every address?): %w", addr, err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			return nil, nil, fmt.Errorf("cluster DNS: listen on tcp %s: %w", addr, err)
		}
	}
	return nil, nil, fmt.Errorf("cluster DNS: no port of %s free for both UDP and TCP after 10 tries", addr)
}

// Addr is the address the server listens on (UDP and TCP).
func (d *ClusterDNS) Addr() string { return d.udp.PacketConn.LocalAddr().String() }

// Ready is closed once the server answers from synced caches.
func (d *ClusterDNS) Ready() <-chan struct{} { return d.ready }

// Run syncs the Service and EndpointSlice caches, serves until ctx ends,
// then shuts both servers down and closes their sockets. It returns nil
// after ctx ends, or the error that stopped a server.
func (d *ClusterDNS) Run(ctx context.Context) error {
	d.factory.Start(ctx.Done())
	defer d.factory.Shutdown()
	for typ, ok := range d.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			d.udp.PacketConn.Close()
			d.tcp.Listener.Close()
			return fmt.Errorf("cluster DNS: the %v cache did not sync: %w", typ, context.Cause(ctx))
		}
	}
	servers := []*dns.Server{d.udp, d.tcp}
	started := make(chan struct{}, len(servers))
	errc := make(chan error, len(servers))
	for _, s := range servers {
		s.NotifyStartedFunc = func() { started <- struct{}{} }
		go func() { errc <- s.ActivateAndServe() }()
	}
	var err error
	running := len(servers)
	// Shutdown is only valid once a server has started: wait for both.
	for n := 0; n < len(servers) && err == nil; {
		select {
		case <-started:
			n++
		case err = <-errc:
			running--
		}
	}
	if err == nil {
		close(d.ready)
		select {
		case <-ctx.Done():
		case err = <-errc:
			running--
		}
	}
	for _, s := range servers {
		_ = s.Shutdown() // an error only says it had stopped already
	}
	for ; running > 0; running-- {
		if e := <-errc; err == nil && e != nil && ctx.Err() == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("cluster DNS on %s: %w", d.Addr(), err)
	}
	return nil
}

// ServeDNS answers one query.
func (d *ClusterDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := d.answer(r)
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size)
	}
	if err := w.WriteMsg(m); err != nil {
		d.log.Warn("write dns answer", "remote", w.RemoteAddr().String(), "error", err)
	}
}

// answer builds the reply to r.
func (d *ClusterDNS) answer(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	if r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m
	}
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := r.Question[0]
	name := dns.CanonicalName(q.Name)
	if q.Qclass != dns.ClassINET || !dns.IsSubDomain(d.domain, name) {
		m.Rcode = dns.RcodeRefused
		d.log.Debug("dns query refused", "name", q.Name, "type", dns.TypeToString[q.Qtype])
		return m
	}
	m.Authoritative = true
	rrs, found, err := d.lookup(name)
	switch {
	case err != nil:
		m.Rcode = dns.RcodeServerFailure
		d.log.Warn("dns lookup", "name", name, "error", err)
		return m
	case !found:
		m.Rcode = dns.RcodeNameError
	default:
		for _, rr := range rrs {
			if t := rr.Header().Rrtype; t == q.Qtype || t == dns.TypeCNAME || q.Qtype == dns.TypeANY {
				m.Answer = append(m.Answer, rr)
			}
		}
		if q.Qtype == dns.TypeSOA && name == d.domain {
			m.Answer = append(m.Answer, d.soa())
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{d.soa()} // negative answers are cached for the SOA's minimum
	}
	d.log.Debug("dns query", "name", name, "type", dns.TypeToString[q.Qtype], "rcode", dns.RcodeToString[m.Rcode], "answers", len(m.Answer))
	return m
}

// lookup returns the records of name (a lower-case FQDN in the cluster
// domain) and whether the name exists; an existing name may have no
// records (the domain itself, svc.<domain>, a namespace with Services).
func (d *ClusterDNS) lookup(name string) ([]dns.RR, bool, error) {
	rel := strings.TrimSuffix(strings.TrimSuffix(name, d.domain), ".")
	var parts []string
	if rel != "" {
		parts = dns.SplitDomainName(rel)
	}
	n := len(parts)
	switch {
	case n == 0: // the domain
		return nil, true, nil
	case parts[n-1] != "svc":
		return nil, false, nil // pod records and anything else: not served
	case n == 1: // svc.<domain>
		return nil, true, nil
	case n == 2: // <ns>.svc.<domain>
		svcs, err := d.services.Services(parts[0]).List(labels.Everything())
		return nil, len(svcs) > 0, err
	case n > 4:
		return nil, false, nil
	}
	ns, svcName := parts[n-2], parts[n-3]
	svc, err := d.services.Services(ns).Get(svcName)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if n == 4 { // <hostname>.<service>.<ns>.svc.<domain>: a headless Service's endpoint
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			return nil, false, nil
		}
		addrs, err := d.endpointAddrs(svc, parts[0])
		return addressRecords(name, addrs), len(addrs) > 0, err
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		target := dns.Fqdn(svc.Spec.ExternalName)
		return []dns.RR{&dns.CNAME{Hdr: header(name, dns.TypeCNAME), Target: target}}, true, nil
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		addrs, err := d.endpointAddrs(svc, "")
		return addressRecords(name, addrs), true, err
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var addrs []netip.Addr
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil {
			addrs = append(addrs, a)
		}
	}
	return addressRecords(name, addrs), true, nil
}

// endpointAddrs returns the sorted, distinct addresses of the Service's
// ready endpoints (every endpoint with publishNotReadyAddresses), only
// those whose hostname is hostname when it is not empty.
func (d *ClusterDNS) endpointAddrs(svc *corev1.Service, hostname string) ([]netip.Addr, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	eps, err := d.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready // nil means ready (discovery/v1)
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			if hostname != "" && (ep.Hostname == nil || !strings.EqualFold(*ep.Hostname, hostname)) {
				continue
			}
			for _, s := range ep.Addresses {
				if a, err := netip.ParseAddr(s); err == nil {
					addrs = append(addrs, a)
				}
			}
		}
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(addrs), nil
}

// addressRecords returns an A or AAAA record for each address.
func addressRecords(name string, addrs []netip.Addr) []dns.RR {
	rrs := make([]dns.RR, 0, len(addrs))
	for _, a := range addrs {
		if a.Is4() || a.Is4In6() {
			rrs = append(rrs, &dns.A{Hdr: header(name, dns.TypeA), A: net.IP(a.Unmap().AsSlice())})
		} else {
			rrs = append(rrs, &dns.AAAA{Hdr: header(name, dns.TypeAAAA), AAAA: net.IP(a.AsSlice())})
		}
	}
	return rrs
}

func header(name string, typ uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: typ, Class: dns.ClassINET, Ttl: dnsTTL}
}

// soa is the cluster domain's SOA record, in negative answers.
func (d *ClusterDNS) soa() dns.RR {
	return &dns.SOA{
		Hdr:     header(d.domain, dns.TypeSOA),
		Ns:      "ns.dns." + d.domain,
		Mbox:    "hostmaster." + d.domain,
		Serial:  1,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  dnsTTL,
	}
}

var _ dns.Handler = (*ClusterDNS)(nil)
