package mesh

import (
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/proxypush"
)

// The ranges of automatically allocated service addresses, Istio's
// defaults (PILOT_IP_AUTOALLOCATE_IPV4_PREFIX and _IPV6_PREFIX): the class E
// 240.240.0.0/16, not routable outside the pod, and the benchmarking
// 2001:2::/48 (RFC 5180). An allocation is an offset n: 240.240.0.0+n and
// 2001:2::+n.
const (
	autoAddressBase4 = "240.240.0.0"
	autoAddressBase6 = "2001:2::"
	// autoAddressSlots is the number of offsets of the IPv4 /16.
	autoAddressSlots = 1 << 16
)

// DNSCapture reports whether the proxy's agent proxies its pod's DNS (node
// metadata DNS_CAPTURE, from ISTIO_META_DNS_CAPTURE). Such a proxy uses
// the services' automatically allocated addresses, as Istio's
// nodeUsesAutoallocatedIPs decides with IP autoallocation on (its
// default).
func DNSCapture(p *proxypush.Proxy) bool {
	if p == nil {
		return false
	}
	on, err := strconv.ParseBool(p.Metadata["DNS_CAPTURE"])
	return err == nil && on
}

// AutoAddressLabel set to "false" on a ServiceEntry opts its hosts out of
// address allocation, as in Istio.
const AutoAddressLabel = "networking.istio.io/enable-autoallocate-ip"

// wantsAutoAddress reports whether a service gets an allocated address:
// a ServiceEntry host without spec.addresses that is not a wildcard, whose
// resolution is not NONE (the destination of a NONE service is the
// address the client asked for) and whose entry (labels) does not opt out
// with AutoAddressLabel, as Istio's ShouldV2AutoAllocateIP and its
// allocation controller (pilot/pkg/controllers/ipallocate) decide.
func wantsAutoAddress(svc *Service, labels map[string]string) bool {
	return len(svc.Addresses) == 0 && !strings.HasPrefix(svc.Hostname, "*") && svc.Resolution != networking.ServiceEntry_NONE &&
		!strings.EqualFold(labels[AutoAddressLabel], "false")
}

// sourceLabels are the labels of the ServiceEntry svc comes from.
func (s *Snapshot) sourceLabels(svc *Service) map[string]string {
	if c := s.serviceSources[svc.Hostname]; c != nil {
		return c.Labels
	}
	return nil
}

// setAutoAddresses sets the service's allocated addresses ([IPv4, IPv6])
// and the views of it that DNS-capture proxies get: a copy whose
// Addresses is the allocated address of the proxy's family.
func (svc *Service) setAutoAddresses(addrs []string) {
	svc.AutoAddresses = addrs
	svc.auto4, svc.auto6 = nil, nil
	if len(addrs) != 2 {
		return
	}
	v4, v6 := *svc, *svc
	v4.Addresses, v6.Addresses = addrs[:1:1], addrs[1:2:2]
	svc.auto4, svc.auto6 = &v4, &v6
}

// autoView is the service as a DNS-capture proxy of the family sees it
// (family "4" or "6"; "" is no DNS capture): the view with its allocated
// address, or svc itself.
func (svc *Service) autoView(family string) *Service {
	switch {
	case family == "4" && svc.auto4 != nil:
		return svc.auto4
	case family == "6" && svc.auto6 != nil:
		return svc.auto6
	}
	return svc
}

// Unviewed returns the snapshot's own service for a view a DNS-capture
// proxy's scope holds (see autoView), or svc itself. Resources that do
// not depend on the service's addresses (its clusters) are built from it,
// so that proxies with and without DNS capture share them.
func (s *Snapshot) Unviewed(svc *Service) *Service {
	// A view has allocated addresses but no views of its own.
	if len(svc.AutoAddresses) > 0 && svc.auto4 == nil && svc.auto6 == nil {
		if base := s.servicesByHost[svc.Hostname]; base != nil && base.auto4 != nil {
			return base
		}
	}
	return svc
}

// autoFamily is the address family whose allocated addresses proxy p
// uses: "" without DNS capture, else "6" for an IPv6 proxy and "4"
// otherwise (as Istio filters the addresses by the proxy's IP family).
func autoFamily(p *proxypush.Proxy) string {
	if !DNSCapture(p) {
		return ""
	}
	if ip, err := netip.ParseAddr(p.IP); err == nil && ip.Unmap().Is6() {
		return "6"
	}
	return "4"
}

// allocateAutoAddresses gives every service that wants one (see
// wantsAutoAddress) an IPv4 and an IPv6 address. file mode keeps no status
// to persist them in, so an allocation is stable instead: a service keeps
// the offset it had in prev (the same host), and a new one gets the first
// free offset from a hash of its namespace and host, so that adding or
// removing one ServiceEntry does not move the others. Offsets whose IPv4
// address ends in .0 or .255, and addresses written in ServiceEntries, are
// never given. Services shared with prev are not modified: one whose
// address must change is replaced by a copy.
func allocateAutoAddresses(s *Snapshot, prev *Snapshot) {
	base4 := netip.MustParseAddr(autoAddressBase4)
	used := make(map[uint32]bool)
	for _, svc := range s.Services {
		for _, a := range svc.Addresses {
			if n, ok := autoOffset(a); ok {
				used[n] = true
			}
		}
	}
	offsets := make([]uint32, len(s.Services))
	// Keep what prev gave, first.
	for i, svc := range s.Services {
		if !wantsAutoAddress(svc, s.sourceLabels(svc)) {
			continue
		}
		old := svc.AutoAddresses
		if p := prevService(prev, svc); len(old) == 0 && p != nil {
			old = p.AutoAddresses
		}
		if len(old) == 0 {
			continue
		}
		if n, ok := autoOffset(old[0]); ok && !used[n] {
			used[n] = true
			offsets[i] = n
		}
	}
	for i, svc := range s.Services {
		if !wantsAutoAddress(svc, s.sourceLabels(svc)) {
			if len(svc.AutoAddresses) > 0 {
				s.replaceService(i, prev, nil)
			}
			continue
		}
		n := offsets[i]
		if n == 0 {
			n = freeAutoOffset(svc, used)
			if n == 0 {
				continue // the range is full: the service keeps no address
			}
			used[n] = true
		}
		addrs := []string{addOffset(base4, n).String(), addOffset(netip.MustParseAddr(autoAddressBase6), n).String()}
		if len(svc.AutoAddresses) == 2 && svc.AutoAddresses[0] == addrs[0] {
			continue
		}
		s.replaceService(i, prev, addrs)
	}
}

// prevService is the service of prev with svc's host and namespace.
func prevService(prev *Snapshot, svc *Service) *Service {
	if prev == nil {
		return nil
	}
	if p := prev.servicesByHost[svc.Hostname]; p != nil && p.Namespace == svc.Namespace {
		return p
	}
	return nil
}

// replaceService sets the allocated addresses of s.Services[i], on a copy
// when the service is shared with prev.
func (s *Snapshot) replaceService(i int, prev *Snapshot, addrs []string) {
	svc := s.Services[i]
	if prev != nil && prev.servicesByHost[svc.Hostname] == svc {
		c := *svc
		svc = &c
		s.Services[i] = svc
		s.servicesByHost[svc.Hostname] = svc
	}
	svc.setAutoAddresses(addrs)
}

// freeAutoOffset is the first free offset from the hash of svc's
// namespace and host; 0 when there is none.
func freeAutoOffset(svc *Service, used map[uint32]bool) uint32 {
	h := fnv.New32a()
	h.Write([]byte(svc.Namespace + "/" + svc.Hostname))
	start := h.Sum32() % autoAddressSlots
	for k := range uint32(autoAddressSlots) {
		n := (start + k) % autoAddressSlots
		if last := n & 0xff; last == 0 || last == 0xff || used[n] {
			continue
		}
		return n
	}
	return 0
}

// autoOffset is the offset of a in the IPv4 range, if it is in it.
func autoOffset(a string) (uint32, bool) {
	ip, err := netip.ParseAddr(a)
	if err != nil || !ip.Is4() {
		return 0, false
	}
	b, base := ip.As4(), netip.MustParseAddr(autoAddressBase4).As4()
	if b[0] != base[0] || b[1] != base[1] {
		return 0, false
	}
	return uint32(b[2])<<8 | uint32(b[3]), true
}

// addOffset adds n to the low 32 bits of a.
func addOffset(a netip.Addr, n uint32) netip.Addr {
	b := a.As16()
	low := uint32(b[12])<<24 | uint32(b[13])<<16 | uint32(b[14])<<8 | uint32(b[15])
	low += n
	b[12], b[13], b[14], b[15] = byte(low>>24), byte(low>>16), byte(low>>8), byte(low)
	out := netip.AddrFrom16(b)
	if a.Is4() {
		return out.Unmap()
	}
	return out
}
