package validate

import (
	"fmt"
	"net/netip"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
	"github.com/straitmesh/strait/internal/protocol"
)

// The checks in this file are those Istio's admission webhook applies to a
// DestinationRule's traffic policies (pkg/config/validation/validation.go
// validateTrafficPolicy and its helpers) and to a ServiceEntry's
// resolution (ValidateServiceEntry), so that what Istio refuses is refused
// here with the field named, rather than generating a cluster with a
// negative limit or an outlier detector that ejects 150 % of the hosts.

// maxMaglevTableSize is Istio's bound: the table size must be a prime
// below it (Envoy's limit).
const maxMaglevTableSize = 5000011

// validateTrafficPolicies checks a DestinationRule's traffic policy and
// each subset's.
func validateTrafficPolicies(el *fielderr.List, s *networking.DestinationRule) {
	validateTrafficPolicy(el, "spec.trafficPolicy", s.TrafficPolicy)
	for i, ss := range s.Subsets {
		if ss != nil {
			validateTrafficPolicy(el, fmt.Sprintf("spec.subsets[%d].trafficPolicy", i), ss.TrafficPolicy)
		}
	}
}

func validateTrafficPolicy(el *fielderr.List, f string, tp *networking.TrafficPolicy) {
	if tp == nil {
		return
	}
	if tp.OutlierDetection == nil && tp.ConnectionPool == nil && tp.LoadBalancer == nil && tp.Tls == nil &&
		tp.PortLevelSettings == nil && tp.Tunnel == nil && tp.ProxyProtocol == nil && tp.RetryBudget == nil {
		el.Add(f, "is empty; set at least one of its fields, or remove it")
		return
	}
	if tp.Tunnel != nil && tp.ProxyProtocol != nil {
		el.Add(f+".proxyProtocol", "cannot be combined with tunnel")
	}
	validateOutlierDetection(el, f+".outlierDetection", tp.OutlierDetection)
	validateConnectionPool(el, f+".connectionPool", tp.ConnectionPool)
	validateLoadBalancer(el, f+".loadBalancer", tp.LoadBalancer)
	for i, pl := range tp.PortLevelSettings {
		pf := fmt.Sprintf("%s.portLevelSettings[%d]", f, i)
		switch {
		case pl == nil:
			el.Add(pf, "must not be null")
			continue
		case pl.Port == nil:
			el.Add(pf+".port", "is required (the service port these settings apply to, e.g. {number: 80})")
		case !validPort(pl.Port.Number):
			el.Add(pf+".port.number", "%d is not a valid port (1-65535)", pl.Port.Number)
		}
		if pl.OutlierDetection == nil && pl.ConnectionPool == nil && pl.LoadBalancer == nil && pl.Tls == nil {
			el.Add(pf, "sets nothing for the port; set loadBalancer, connectionPool, outlierDetection or tls")
			continue
		}
		validateOutlierDetection(el, pf+".outlierDetection", pl.OutlierDetection)
		validateConnectionPool(el, pf+".connectionPool", pl.ConnectionPool)
		validateLoadBalancer(el, pf+".loadBalancer", pl.LoadBalancer)
	}
}

func validateOutlierDetection(el *fielderr.List, f string, od *networking.OutlierDetection) {
	if od == nil {
		return
	}
	if !od.SplitExternalLocalOriginErrors && od.ConsecutiveLocalOriginFailures.GetValue() > 0 {
		el.Add(f+".consecutiveLocalOriginFailures", "needs splitExternalLocalOriginErrors: true (without it local failures count as 5xx)")
	}
	for _, p := range []struct {
		name string
		v    int32
	}{{"maxEjectionPercent", od.MaxEjectionPercent}, {"minHealthPercent", od.MinHealthPercent}} {
		if p.v < 0 || p.v > 100 {
			el.Add(f+"."+p.name, "%d is not a percentage (0 to 100)", p.v)
		}
	}
}

func validateConnectionPool(el *fielderr.List, f string, cp *networking.ConnectionPoolSettings) {
	if cp == nil {
		return
	}
	if cp.Http == nil && cp.Tcp == nil {
		el.Add(f, "is empty; set tcp or http settings, or remove it")
		return
	}
	nonNegative := func(name string, v int32) {
		if v < 0 {
			el.Add(f+"."+name, "%d is negative; it must be 0 or more", v)
		}
	}
	if h := cp.Http; h != nil {
		nonNegative("http.http1MaxPendingRequests", h.Http1MaxPendingRequests)
		nonNegative("http.http2MaxRequests", h.Http2MaxRequests)
		nonNegative("http.maxRequestsPerConnection", h.MaxRequestsPerConnection)
		nonNegative("http.maxRetries", h.MaxRetries)
		nonNegative("http.maxConcurrentStreams", h.MaxConcurrentStreams)
		if h.H2UpgradePolicy == networking.ConnectionPoolSettings_HTTPSettings_UPGRADE && h.UseClientProtocol {
			el.Add(f+".http.useClientProtocol", "cannot be true with h2UpgradePolicy UPGRADE")
		}
	}
	if t := cp.Tcp; t != nil {
		nonNegative("tcp.maxConnections", t.MaxConnections)
	}
}

func validateLoadBalancer(el *fielderr.List, f string, lb *networking.LoadBalancerSettings) {
	if lb == nil {
		return
	}
	if ch := lb.GetConsistentHash(); ch != nil {
		cf := f + ".consistentHash"
		if c := ch.GetHttpCookie(); c != nil {
			if c.Name == "" {
				el.Add(cf+".httpCookie.name", "is required (the cookie to hash on)")
			}
			seen := map[string]bool{}
			for i, a := range c.Attributes {
				af := fmt.Sprintf("%s.httpCookie.attributes[%d].name", cf, i)
				switch {
				case a.GetName() == "":
					el.Add(af, "must not be empty")
				case seen[a.GetName()]:
					el.Add(af, "%q is listed twice", a.GetName())
				}
				seen[a.GetName()] = true
			}
		}
		//nolint:staticcheck // minimumRingSize is deprecated, and still loaded as Istio loads it.
		if ch.MinimumRingSize != 0 && ch.HashAlgorithm != nil {
			el.Add(cf+".minimumRingSize", "cannot be combined with ringHash or maglev; set the size there")
		}
		if m := ch.GetMaglev(); m != nil {
			switch n := m.TableSize; {
			case n == 0:
				el.Add(cf+".maglev.tableSize", "is required (a prime, e.g. 65537)")
			case n >= maxMaglevTableSize:
				el.Add(cf+".maglev.tableSize", "%d is too large; it must be below %d", n, maxMaglevTableSize)
			case !isPrime(n):
				el.Add(cf+".maglev.tableSize", "%d is not a prime number (e.g. 65537)", n)
			}
		}
	}
	if w := lb.Warmup; w != nil {
		if w.Duration == nil {
			el.Add(f+".warmup.duration", "is required (how long a new endpoint warms up, e.g. 60s)")
		}
		if w.MinimumPercent.GetValue() > 100 {
			el.Add(f+".warmup.minimumPercent", "%v is not a percentage (0 to 100)", w.MinimumPercent.GetValue())
		}
		if w.Aggression != nil && w.Aggression.GetValue() <= 0 {
			el.Add(f+".warmup.aggression", "%v must be greater than 0", w.Aggression.GetValue())
		}
	}
}

// isPrime is Envoy's primality test for a Maglev table size, which Istio
// applies at validation.
func isPrime(x uint64) bool {
	if x != 0 && x < 4 {
		return true
	}
	if x&1 == 0 {
		return false
	}
	for d := uint64(3); d*d <= x; d += 2 {
		if x%d == 0 {
			return false
		}
	}
	return true
}

// validateResolution checks what a ServiceEntry's resolution allows, as
// Istio's ValidateServiceEntry: NONE has no endpoints; CIDR addresses
// only with NONE or STATIC; DNS without endpoints resolves its hosts, so
// they are names, not wildcards; DNS_ROUND_ROBIN has at most one endpoint;
// several hosts share a TCP port only with NONE (nothing else tells them
// apart).
func validateResolution(el *fielderr.List, s *networking.ServiceEntry) {
	res := s.Resolution
	if res == networking.ServiceEntry_NONE && len(s.Endpoints) > 0 {
		el.Add("spec.endpoints", "must be empty with resolution NONE (the connection goes to the address the client asked for)")
	}
	if res != networking.ServiceEntry_NONE && res != networking.ServiceEntry_STATIC {
		for i, a := range s.Addresses {
			if _, err := netip.ParsePrefix(a); err == nil {
				el.Add(fmt.Sprintf("spec.addresses[%d]", i), "%q: CIDR addresses are allowed only with resolution NONE or STATIC", a)
			}
		}
	}
	dns := res == networking.ServiceEntry_DNS || res == networking.ServiceEntry_DNS_ROUND_ROBIN
	if dns && len(s.Endpoints) == 0 {
		for i, h := range s.Hosts {
			if strings.Contains(h, "*") {
				el.Add(fmt.Sprintf("spec.hosts[%d]", i), "%q: with resolution %s and no endpoints the hosts are resolved, so each must be a name without wildcard (or use resolution NONE)", h, res)
			}
		}
	}
	if res == networking.ServiceEntry_DNS_ROUND_ROBIN && len(s.Endpoints) > 1 {
		el.Add("spec.endpoints", "resolution DNS_ROUND_ROBIN takes at most one endpoint (use DNS for several)")
	}
	if res != networking.ServiceEntry_NONE && len(s.Hosts) > 1 {
		for i, p := range s.Ports {
			if p == nil {
				continue
			}
			proto := protocol.ForPort(p.Protocol, p.Name)
			if !proto.IsHTTP() && proto != protocol.TLS && proto != protocol.HTTPS {
				el.Add(fmt.Sprintf("spec.ports[%d]", i), "port %d (%s) is not HTTP or TLS, so the %d hosts cannot be told apart on it; use one host per ServiceEntry, or resolution NONE", p.Number, proto, len(s.Hosts))
				break
			}
		}
	}
}
