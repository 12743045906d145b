package istioconfig

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/protocol"
)

var (
	dns1123Label  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Domain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	portNameRe    = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`)
	// hostRe accepts a DNS name, optionally with a leading "*." wildcard, or "*".
	hostRe = regexp.MustCompile(`^(\*|(\*\.)?[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?)*\.?)$`)
)

func validateMeta(el *errorList, md metadata) {
	switch {
	case md.Name == "":
		el.add("metadata.name", "must be set")
	case len(md.Name) > 253 || !dns1123Domain.MatchString(md.Name):
		el.add("metadata.name", "%q is not a valid name (lower-case letters, digits, '-' and '.')", md.Name)
	}
	if md.Namespace != "" && (len(md.Namespace) > 63 || !dns1123Label.MatchString(md.Namespace)) {
		el.add("metadata.namespace", "%q is not a valid namespace (lower-case letters, digits and '-')", md.Namespace)
	}
}

func validateSpec(el *errorList, c *Config) {
	switch s := c.Spec.(type) {
	case *networking.ServiceEntry:
		validateServiceEntry(el, c.Namespace, s)
	case *networking.WorkloadEntry:
		validateWorkloadEntry(el, "spec", s, false)
	case *networking.VirtualService:
		validateVirtualService(el, c.Namespace, s)
	case *networking.DestinationRule:
		validateDestinationRule(el, c.Namespace, s)
	case *networking.Sidecar:
		validateSidecar(el, s)
	case *networking.Gateway:
		validateGateway(el, s) // validate_gateway.go
	case *security.AuthorizationPolicy:
		validateAuthorizationPolicy(el, c, s) // validate_authz.go
	case *security.PeerAuthentication:
		validatePeerAuthentication(el, s) // validate_peerauthn.go
	case *security.RequestAuthentication:
		validateRequestAuthentication(el, s) // validate_jwt.go
	}
}

// validateSidecar checks the parts of a Sidecar that Strait uses: the
// egress listeners (ports, binds, the catch-all listener last), their
// hosts ("NAMESPACE/HOST", NAMESPACE being a name, "*", "." or "~") and
// the workload selector's labels.
func validateSidecar(el *errorList, s *networking.Sidecar) {
	if s.WorkloadSelector != nil {
		validateLabels(el, "spec.workloadSelector.labels", s.WorkloadSelector.Labels)
	}
	if len(s.Egress) == 0 && len(s.Ingress) == 0 && s.OutboundTrafficPolicy == nil && s.InboundConnectionPool == nil {
		el.add("spec", "is empty; set egress, ingress, outboundTrafficPolicy or inboundConnectionPool (Istio refuses an empty Sidecar)")
	}
	validateConnectionPool(el, "spec.inboundConnectionPool", s.InboundConnectionPool) // validate_policy.go
	for i, in := range s.Ingress {
		if in != nil {
			validateConnectionPool(el, fmt.Sprintf("spec.ingress[%d].connectionPool", i), in.ConnectionPool)
		}
	}
	inPorts := map[uint32]bool{}
	for i, in := range s.Ingress {
		validateIngress(el, fmt.Sprintf("spec.ingress[%d]", i), in, inPorts)
	}
	ports := map[uint32]bool{}
	for i, eg := range s.Egress {
		ef := fmt.Sprintf("spec.egress[%d]", i)
		if eg.Port == nil {
			if i != len(s.Egress)-1 {
				el.add(ef+".port", "is required on every egress listener but the last (the catch-all listener without a port comes last, and only once)")
			}
			if eg.Bind != "" || eg.CaptureMode != networking.CaptureMode_DEFAULT {
				el.add(ef+".port", "is required with bind or captureMode (the catch-all listener has neither)")
			}
		} else {
			validateEgressPort(el, ef, eg, ports)
		}
		if len(eg.Hosts) == 0 {
			el.add(fmt.Sprintf("spec.egress[%d].hosts", i), "must list at least one NAMESPACE/HOST (e.g. \"./*\" or \"istio-system/*\")")
		}
		for j, h := range eg.Hosts {
			f := fmt.Sprintf("spec.egress[%d].hosts[%d]", i, j)
			ns, host, ok := strings.Cut(h, "/")
			if !ok || ns == "" {
				el.add(f, "%q is not NAMESPACE/HOST (e.g. \"./*\", \"*/reviews.default.svc.cluster.local\")", h)
				continue
			}
			if ns != "*" && ns != "." && ns != "~" && !dns1123Label.MatchString(ns) {
				el.add(f, "namespace %q is not a namespace name, \"*\", \".\" or \"~\"", ns)
			}
			if host != "*" {
				validateHost(el, f, host)
			}
		}
	}
}

// validateIngress checks an ingress listener: a port (as an egress
// listener's) and a defaultEndpoint Strait can send to.
func validateIngress(el *errorList, f string, in *networking.IstioIngressListener, ports map[uint32]bool) {
	if in.Port == nil {
		el.add(f+".port", "is required on an ingress listener (e.g. {number: 9080, protocol: HTTP, name: http})")
	} else {
		validateListenerPort(el, f, in.Port, ports)
	}
	if in.Bind != "" {
		if _, err := netip.ParseAddr(in.Bind); err != nil {
			el.add(f+".bind", "%q is not an IP address (e.g. the workload's own address)", in.Bind)
		}
		if in.CaptureMode != networking.CaptureMode_NONE {
			el.add(f+".bind", "applies only with captureMode: NONE (a captured port is served by virtualInbound); set captureMode NONE or remove bind")
		}
	}
	ep := in.DefaultEndpoint
	if ep == "" {
		return
	}
	if strings.HasPrefix(ep, "unix://") {
		el.add(f+".defaultEndpoint", "%q: unix domain socket endpoints are not supported by Strait yet (use 127.0.0.1:PORT or 0.0.0.0:PORT)", ep)
		return
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		el.add(f+".defaultEndpoint", "%q is not HOST:PORT (127.0.0.1:PORT, [::1]:PORT or 0.0.0.0:PORT)", ep)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || !validPort(uint32(n)) {
		el.add(f+".defaultEndpoint", "%q: port %q is not 1-65535", ep, port)
	}
	switch host {
	case "127.0.0.1", "::1", "0.0.0.0":
	case "::":
		el.add(f+".defaultEndpoint", "%q: the workload's IPv6 address is not supported by Strait yet (use 0.0.0.0:PORT or [::1]:PORT)", ep)
	default:
		el.add(f+".defaultEndpoint", "%q: the host must be 127.0.0.1, [::1] or 0.0.0.0 (the workload's own address)", ep)
	}
}

// validateEgressPort checks an egress listener with a port: its port and
// an IP address to bind.
func validateEgressPort(el *errorList, ef string, eg *networking.IstioEgressListener, ports map[uint32]bool) {
	validateListenerPort(el, ef, eg.Port, ports)
	if eg.Bind != "" {
		if _, err := netip.ParseAddr(eg.Bind); err != nil {
			el.add(ef+".bind", "%q is not an IP address (e.g. 127.0.0.1; unix domain sockets are not supported by Strait yet)", eg.Bind)
		}
	}
}

// validateListenerPort checks the port of an egress or ingress listener:
// a TCP port the sidecar's own listeners do not use, unique among the
// Sidecar's listeners of that direction, a protocol Istio defines other
// than UDP, and a valid name.
func validateListenerPort(el *errorList, ef string, sp *networking.SidecarPort, ports map[uint32]bool) {
	n := sp.Number
	switch {
	case !validPort(n):
		el.add(ef+".port.number", "must be 1-65535, got %d (unix domain socket listeners are not supported by Strait yet)", n)
	case n == 15001 || n == 15006 || n == 15000 || n == 15020 || n == 15021 || n == 15090:
		el.add(ef+".port.number", "%d is a port of the sidecar's own listeners; pick another", n)
	case ports[n]:
		el.add(ef+".port.number", "%d is already the port of an earlier listener; ports must be unique", n)
	}
	ports[n] = true
	p, ok := protocol.Parse(sp.Protocol)
	switch {
	case !ok:
		el.add(ef+".port.protocol", "%q is not a protocol Istio defines (one of %s)", sp.Protocol, strings.Join(protocol.Names(), ", "))
	case p == protocol.UDP:
		el.add(ef+".port.protocol", "UDP listeners are not supported by Strait yet (use TCP, HTTP, HTTP2, GRPC, TLS, ...)")
	}
	if sp.Name != "" && !portNameRe.MatchString(sp.Name) {
		el.add(ef+".port.name", "%q is not a port name (letters, digits, '-', '_' and '.', e.g. http-local)", sp.Name)
	}
}

// validateSubnet checks an address or CIDR of a tcp match.
func validateSubnet(el *errorList, field, v string) {
	if _, err := netip.ParsePrefix(v); err == nil {
		return
	}
	if _, err := netip.ParseAddr(v); err == nil {
		return
	}
	el.add(field, "%q is not an IP address or CIDR (e.g. 10.1.0.0/16 or 10.1.2.3)", v)
}

func validPort(n uint32) bool { return n >= 1 && n <= 65535 }

func validateHost(el *errorList, field, h string) {
	switch {
	case h == "":
		el.add(field, "must not be empty")
	case !hostRe.MatchString(h):
		el.add(field, "%q is not a valid host name (e.g. reviews.default.svc.cluster.local, or *.example.com)", h)
	}
}

func validateServiceEntry(el *errorList, namespace string, s *networking.ServiceEntry) {
	refuseDNSEndpointLocality(el, s) // locality.go
	validateResolution(el, s)        // validate_policy.go
	validateExportTo(el, namespace, s.ExportTo, true)
	if len(s.Hosts) == 0 {
		el.add("spec.hosts", "must list at least one host")
	}
	for i, h := range s.Hosts {
		validateHost(el, fmt.Sprintf("spec.hosts[%d]", i), h)
		if h == "*" {
			el.add(fmt.Sprintf("spec.hosts[%d]", i), `"*" is not allowed in a ServiceEntry`)
		}
	}
	for i, a := range s.Addresses {
		if _, err := netip.ParseAddr(a); err == nil {
			continue
		}
		if _, err := netip.ParsePrefix(a); err == nil {
			continue
		}
		el.add(fmt.Sprintf("spec.addresses[%d]", i), "%q is not an IP address or CIDR (e.g. 240.240.0.10 or 10.0.0.0/16)", a)
	}
	if len(s.Ports) == 0 {
		el.add("spec.ports", "must list at least one port")
	}
	numbers, names := map[uint32]int{}, map[string]int{}
	for i, p := range s.Ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		if p == nil {
			el.add(f, "must not be null")
			continue
		}
		if !validPort(p.Number) {
			el.add(f+".number", "%d is not a valid port (1-65535)", p.Number)
		} else if j, dup := numbers[p.Number]; dup {
			el.add(f+".number", "%d is already used by spec.ports[%d]", p.Number, j)
		} else {
			numbers[p.Number] = i
		}
		switch {
		case p.Name == "":
			el.add(f+".name", "must be set (e.g. http, or http-web)")
		case !portNameRe.MatchString(p.Name):
			el.add(f+".name", "%q is not a valid port name", p.Name)
		default:
			if j, dup := names[p.Name]; dup {
				el.add(f+".name", "%q is already used by spec.ports[%d]", p.Name, j)
			}
			names[p.Name] = i
		}
		if _, known := protocol.Parse(p.Protocol); p.Protocol != "" && !known {
			el.add(f+".protocol", "%q is not a known protocol (one of %s)", p.Protocol, strings.Join(protocol.Names(), ", "))
		}
		if p.TargetPort != 0 && !validPort(p.TargetPort) {
			el.add(f+".targetPort", "%d is not a valid port (1-65535)", p.TargetPort)
		}
	}
	if s.WorkloadSelector != nil && len(s.Endpoints) > 0 {
		el.add("spec.workloadSelector", "cannot be used together with spec.endpoints")
	}
	if s.WorkloadSelector != nil {
		validateLabels(el, "spec.workloadSelector.labels", s.WorkloadSelector.Labels)
	}
	dnsOK := s.Resolution == networking.ServiceEntry_DNS || s.Resolution == networking.ServiceEntry_DNS_ROUND_ROBIN
	for i, ep := range s.Endpoints {
		f := fmt.Sprintf("spec.endpoints[%d]", i)
		if ep == nil {
			el.add(f, "must not be null")
			continue
		}
		validateWorkloadEntry(el, f, ep, dnsOK)
		for name := range ep.Ports {
			if _, ok := names[name]; !ok {
				el.add(fmt.Sprintf("%s.ports[%s]", f, name), "no port named %q in spec.ports", name)
			}
		}
	}
}

// validateWorkloadEntry checks a WorkloadEntry spec or an inline endpoint.
// Host names are accepted only when allowHostname (DNS resolution).
func validateWorkloadEntry(el *errorList, f string, w *networking.WorkloadEntry, allowHostname bool) {
	switch {
	case w.Address == "":
		el.add(f+".address", "must be set to the workload's IP address")
	case strings.HasPrefix(w.Address, "unix://"):
		// A Unix domain socket endpoint; accepted as Istio does.
	default:
		if _, err := netip.ParseAddr(w.Address); err != nil {
			if !allowHostname {
				el.add(f+".address", "%q is not an IP address (host names are only supported with resolution DNS)", w.Address)
			} else if !hostRe.MatchString(w.Address) {
				el.add(f+".address", "%q is not an IP address or host name", w.Address)
			}
		}
	}
	for _, name := range sortedKeys(w.Ports) {
		if !validPort(w.Ports[name]) {
			el.add(fmt.Sprintf("%s.ports[%s]", f, name), "%d is not a valid port (1-65535)", w.Ports[name])
		}
	}
	validateLabels(el, f+".labels", w.Labels)
	if w.Weight > 0 && w.Weight > 1<<24 {
		el.add(f+".weight", "%d is too large", w.Weight)
	}
}

var labelKeyRe = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
var labelValueRe = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)

func validateLabels(el *errorList, f string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		if !labelKeyRe.MatchString(k) {
			el.add(f, "%q is not a valid label key", k)
		}
		if v := labels[k]; len(v) > 63 || !labelValueRe.MatchString(v) {
			el.add(fmt.Sprintf("%s[%s]", f, k), "%q is not a valid label value", v)
		}
	}
}

func validateVirtualService(el *errorList, namespace string, s *networking.VirtualService) {
	// A VirtualService without hosts is a delegate: its http routes are
	// merged under the root route that names it (Istio's
	// validateVirtualService with delegation on).
	if len(s.Hosts) == 0 {
		if len(s.Gateways) > 0 {
			el.add("spec.gateways", "a delegate VirtualService (one without hosts) must not set gateways; set them on the root")
		}
		if len(s.Tcp) > 0 || len(s.Tls) > 0 {
			el.add("spec", "a delegate VirtualService (one without hosts) may only have http routes")
		}
		for i, r := range s.Http {
			if r.GetDelegate() != nil {
				el.add(fmt.Sprintf("spec.http[%d].delegate", i), "a delegate VirtualService (one without hosts) cannot delegate again")
			}
		}
	}
	mesh := len(s.Gateways) == 0
	for _, g := range s.Gateways {
		mesh = mesh || g == "mesh"
	}
	for i, h := range s.Hosts {
		hf := fmt.Sprintf("spec.hosts[%d]", i)
		validateHost(el, hf, h)
		if h == "*" && mesh {
			el.add(hf, `"*" is not allowed for the sidecars (gateways unset or "mesh"); name the hosts`)
		}
		for j := 0; j < i; j++ {
			if hostsOverlap(s.Hosts[j], h) {
				el.add(hf, "%q overlaps spec.hosts[%d] %q; list each host once", h, j, s.Hosts[j])
			}
		}
	}
	if len(s.Http) == 0 && len(s.Tcp) == 0 && len(s.Tls) == 0 {
		el.add("spec", "must have at least one of http, tcp or tls routes")
	}
	for i, r := range s.Http {
		f := fmt.Sprintf("spec.http[%d]", i)
		if r == nil {
			el.add(f, "must not be null")
			continue
		}
		for j, m := range r.Match {
			if m != nil {
				validateHTTPMatch(el, fmt.Sprintf("%s.match[%d]", f, j), m)
			}
		}
		if len(r.Route) == 0 && r.Redirect == nil && r.DirectResponse == nil && r.Delegate == nil {
			el.add(f+".route", "must list at least one destination")
		}
		if d := r.Delegate; d != nil {
			if d.Name == "" {
				el.add(f+".delegate.name", "must name the delegate VirtualService")
			}
			if len(r.Route) > 0 || r.Redirect != nil || r.DirectResponse != nil {
				el.add(f+".delegate", "cannot be combined with route, redirect or directResponse: the delegate's routes answer")
			}
		}
		weights := make([]int32, 0, len(r.Route))
		for k, d := range r.Route {
			df := fmt.Sprintf("%s.route[%d]", f, k)
			if d == nil {
				el.add(df, "must not be null")
				continue
			}
			validateDestination(el, df+".destination", d.Destination)
			weights = append(weights, d.Weight)
		}
		validateWeights(el, f+".route", weights) // validate_route.go
		validateHTTPRouteActions(el, f, r)
		validateHTTPActionLimits(el, f, r)
	}
	for i, r := range s.Tcp {
		f := fmt.Sprintf("spec.tcp[%d]", i)
		if r == nil {
			continue
		}
		for j, m := range r.Match {
			if m == nil {
				continue
			}
			mf := fmt.Sprintf("%s.match[%d]", f, j)
			if m.SourceSubnet != "" {
				validateSubnet(el, mf+".sourceSubnet", m.SourceSubnet)
			}
			for k, sn := range m.DestinationSubnets {
				validateSubnet(el, fmt.Sprintf("%s.destinationSubnets[%d]", mf, k), sn)
			}
			if m.Port != 0 && !validPort(m.Port) {
				el.add(mf+".port", "%d is not a valid port (1-65535)", m.Port)
			}
			validateLabels(el, mf+".sourceLabels", m.SourceLabels)
		}
		if len(r.Route) == 0 {
			el.add(f+".route", "must list at least one destination")
		}
		validateRouteDestinations(el, f+".route", r.Route)
	}
	for i, r := range s.Tls {
		f := fmt.Sprintf("spec.tls[%d]", i)
		if r == nil {
			el.add(f, "must not be null")
			continue
		}
		validateTLSRoute(el, f, r, s.Hosts) // validate_route.go
		validateRouteDestinations(el, f+".route", r.Route)
	}
	validateExportTo(el, namespace, s.ExportTo, false)
}

// validateRouteDestinations checks the destinations and weights of a tcp
// or tls rule.
func validateRouteDestinations(el *errorList, f string, route []*networking.RouteDestination) {
	weights := make([]int32, 0, len(route))
	for k, d := range route {
		df := fmt.Sprintf("%s[%d]", f, k)
		if d == nil {
			el.add(df, "must not be null")
			continue
		}
		validateDestination(el, df+".destination", d.Destination)
		weights = append(weights, d.Weight)
	}
	validateWeights(el, f, weights)
}

// validateHTTPActionLimits refuses the values of honoured fields that
// strait-proxy cannot carry out: redirect codes Envoy has no response code
// for (Istio drops such a route with a warning), and header values with
// '%', which Envoy reads as a substitution formatter.
func validateHTTPActionLimits(el *errorList, f string, r *networking.HTTPRoute) {
	if rd := r.Redirect; rd != nil {
		switch c := rd.RedirectCode; {
		case c == 0, c == 301, c == 302, c == 303, c == 307, c == 308:
		case c >= 300 && c <= 399: // other codes: validateRedirect
			el.add(f+".redirect.redirectCode", "%d: %s (use 301, 302, 303, 307 or 308)", rd.RedirectCode, notSupported)
		}
	}
	checkHeaders := func(hf string, h *networking.Headers) {
		for _, op := range []struct {
			name string
			m    map[string]string
		}{
			{"request.set", h.GetRequest().GetSet()}, {"request.add", h.GetRequest().GetAdd()},
			{"response.set", h.GetResponse().GetSet()}, {"response.add", h.GetResponse().GetAdd()},
		} {
			for _, k := range sortedKeys(op.m) {
				if strings.Contains(op.m[k], "%") {
					el.add(fmt.Sprintf("%s.%s[%s]", hf, op.name, k), "a value with '%%' (Envoy's substitution formatters) is %s", notSupported)
				}
			}
		}
	}
	checkHeaders(f+".headers", r.Headers)
	for k, d := range r.Route {
		if d != nil {
			checkHeaders(fmt.Sprintf("%s.route[%d].headers", f, k), d.Headers)
		}
	}
}

func validateDestination(el *errorList, f string, d *networking.Destination) {
	if d == nil {
		el.add(f, "must be set")
		return
	}
	if d.Host == "" {
		el.add(f+".host", "must be set")
	} else {
		validateHost(el, f+".host", d.Host)
		if d.Host == "*" {
			el.add(f+".host", `"*" is not a destination; name the service's host`)
		}
	}
	if d.Subset != "" && (len(d.Subset) > 63 || !dns1123Label.MatchString(d.Subset)) {
		el.add(f+".subset", "%q is not a valid subset name (a DNS label: lower-case letters, digits and '-')", d.Subset)
	}
	if d.Port != nil && !validPort(d.Port.Number) {
		el.add(f+".port.number", "%d is not a valid port (1-65535)", d.Port.Number)
	}
}

// StringMatch kinds, for what Istio accepts in each place
// (pkg/config/validation: validateHTTPRouteMatchRequest).
const (
	// uriMatch: an empty prefix is allowed.
	uriMatch = iota
	// valueMatch: scheme, method, authority, headers, queryParams: a prefix
	// must not be empty; an empty StringMatch matches on presence.
	valueMatch
	// withoutMatch: withoutHeaders, where the regex "*" means "present".
	withoutMatch
)

// maxRegexLen is Istio's bound on a match regex (Envoy's RE2 program size
// is always larger than the length).
const maxRegexLen = 1024

var headerNameRe = regexp.MustCompile(`^[-_A-Za-z0-9]+$`)

// jwtClaimPrefix starts a header match on a JWT claim
// ("@request.auth.claims.group"), which needs request authentication.
const jwtClaimPrefix = "@request.auth.claims"

// validateHTTPMatch checks one HTTPMatchRequest as Istio validates it.
func validateHTTPMatch(el *errorList, mf string, m *networking.HTTPMatchRequest) {
	validateStringMatch(el, mf+".uri", m.Uri, uriMatch)
	validateStringMatch(el, mf+".scheme", m.Scheme, valueMatch)
	validateStringMatch(el, mf+".method", m.Method, valueMatch)
	validateStringMatch(el, mf+".authority", m.Authority, valueMatch)
	for _, field := range []struct {
		name    string
		headers map[string]*networking.StringMatch
		kind    int
	}{{"headers", m.Headers, valueMatch}, {"withoutHeaders", m.WithoutHeaders, withoutMatch}} {
		for _, name := range sortedKeys(field.headers) {
			hf := fmt.Sprintf("%s.%s[%s]", mf, field.name, name)
			switch {
			case name == "":
				el.add(hf, "header name must not be empty")
			case strings.HasPrefix(name, jwtClaimPrefix):
				el.addErr(hf, fmt.Errorf("matching a JWT claim (%s) is %w", jwtClaimPrefix, ErrNotSupported))
			case name == ":method" || name == ":scheme" || name == ":authority" || name == ":path":
			case strings.HasPrefix(name, ":"):
				el.add(hf, "%q is not a request pseudo-header (:method, :scheme, :authority or :path)", name)
			case !headerNameRe.MatchString(name):
				el.add(hf, "%q is not a valid header name (letters, digits, '-' and '_')", name)
			}
			validateStringMatch(el, hf, field.headers[name], field.kind)
		}
	}
	for _, name := range sortedKeys(m.QueryParams) {
		qf := fmt.Sprintf("%s.queryParams[%s]", mf, name)
		if name == "" {
			el.add(qf, "query parameter name must not be empty")
		}
		validateStringMatch(el, qf, m.QueryParams[name], valueMatch)
	}
	if m.Port != 0 && !validPort(m.Port) {
		el.add(mf+".port", "%d is not a valid port (1-65535)", m.Port)
	}
	validateLabels(el, mf+".sourceLabels", m.SourceLabels)
	if m.SourceNamespace != "" && (len(m.SourceNamespace) > 63 || !dns1123Label.MatchString(m.SourceNamespace)) {
		el.add(mf+".sourceNamespace", "%q is not a valid namespace (lower-case letters, digits and '-')", m.SourceNamespace)
	}
	for i, g := range m.Gateways {
		if g == "" {
			el.add(fmt.Sprintf("%s.gateways[%d]", mf, i), "must not be empty (use \"mesh\" for the sidecars)")
		}
	}
}

func validateStringMatch(el *errorList, f string, m *networking.StringMatch, kind int) {
	if m == nil {
		return
	}
	switch t := m.MatchType.(type) {
	case *networking.StringMatch_Prefix:
		if t.Prefix == "" && kind != uriMatch {
			el.add(f+".prefix", "must not be empty (an empty match, {}, matches any value)")
		}
	case *networking.StringMatch_Regex:
		if t.Regex == "*" && kind == withoutMatch {
			return // Istio: "present"
		}
		switch {
		case t.Regex == "":
			el.add(f+".regex", "must not be empty")
		case len(t.Regex) > maxRegexLen:
			el.add(f+".regex", "is %d characters; at most %d are allowed", len(t.Regex), maxRegexLen)
		default:
			if _, err := regexp.Compile(t.Regex); err != nil {
				el.add(f+".regex", "%q is not a valid RE2 regular expression: %v", t.Regex, err)
			}
		}
	}
}

func validateDestinationRule(el *errorList, namespace string, s *networking.DestinationRule) {
	validateHost(el, "spec.host", s.Host)
	names := map[string]int{}
	for i, ss := range s.Subsets {
		f := fmt.Sprintf("spec.subsets[%d]", i)
		if ss == nil {
			el.add(f, "must not be null")
			continue
		}
		switch {
		case ss.Name == "":
			el.add(f+".name", "must be set")
		case len(ss.Name) > 63 || !dns1123Label.MatchString(ss.Name):
			el.add(f+".name", "%q is not a valid subset name (a DNS label: lower-case letters, digits and '-')", ss.Name)
		default:
			if j, dup := names[ss.Name]; dup {
				el.add(f+".name", "%q is already used by spec.subsets[%d]", ss.Name, j)
			}
			names[ss.Name] = i
		}
		validateLabels(el, f+".labels", ss.Labels)
		validateTrafficPolicyTLS(el, f+".trafficPolicy", ss.TrafficPolicy)
	}
	validateTrafficPolicyTLS(el, "spec.trafficPolicy", s.TrafficPolicy)
	validateLocalityLbSettings(el, s)
	validateTrafficPolicies(el, s) // validate_policy.go
	validateExportTo(el, namespace, s.ExportTo, false)
}

// validateTrafficPolicyTLS checks the tls and http2KeepAlive of a traffic policy and of its
// port-level settings.
func validateTrafficPolicyTLS(el *errorList, f string, tp *networking.TrafficPolicy) {
	if tp == nil {
		return
	}
	validateClientTLS(el, f+".tls", tp.Tls)
	validateHTTP2KeepAlive(el, f+".connectionPool.http.http2KeepAlive", tp.GetConnectionPool().GetHttp().GetHttp2KeepAlive())
	for i, pl := range tp.PortLevelSettings {
		if pl != nil {
			pf := fmt.Sprintf("%s.portLevelSettings[%d]", f, i)
			validateClientTLS(el, pf+".tls", pl.Tls)
			validateHTTP2KeepAlive(el, pf+".connectionPool.http.http2KeepAlive", pl.GetConnectionPool().GetHttp().GetHttp2KeepAlive())
		}
	}
}

// validateHTTP2KeepAlive applies Istio's rule (pkg/config/validation
// validateConnectionPool): both interval and timeout are required.
func validateHTTP2KeepAlive(el *errorList, f string, ka *networking.ConnectionPoolSettings_HTTPSettings_ConnectionKeepalive) {
	if ka == nil {
		return
	}
	if ka.Interval == nil {
		el.add(f+".interval", "is required (how often to send an HTTP/2 PING, e.g. 30s)")
	}
	if ka.Timeout == nil {
		el.add(f+".timeout", "is required (how long to wait for the PING's ACK, e.g. 5s)")
	}
}

// validateClientTLS applies Istio's rules for a DestinationRule's tls
// (pkg/config/validation/agent validateTLS): MUTUAL needs a certificate
// and a key; with insecureSkipVerify no CA and no SANs. The file paths
// become SDS resource names "file-cert:CERT~KEY" and "file-root:CA", so
// they may not contain "~".
func validateClientTLS(el *errorList, f string, t *networking.ClientTLSSettings) {
	if t == nil {
		return
	}
	for _, p := range []struct{ name, value string }{
		{"clientCertificate", t.ClientCertificate}, {"privateKey", t.PrivateKey}, {"caCertificates", t.CaCertificates},
	} {
		if strings.Contains(p.value, "~") {
			el.add(f+"."+p.name, "%q contains \"~\", which separates certificate and key in the SDS resource name; use a path without it", p.value)
		}
	}
	if t.GetInsecureSkipVerify().GetValue() && (t.Mode == networking.ClientTLSSettings_SIMPLE || t.Mode == networking.ClientTLSSettings_MUTUAL) {
		if t.CaCertificates != "" {
			el.add(f+".caCertificates", "cannot be set when insecureSkipVerify is true (remove one of them)")
		}
		if len(t.SubjectAltNames) > 0 {
			el.add(f+".subjectAltNames", "cannot be set when insecureSkipVerify is true (remove one of them)")
		}
	}
	if t.Mode == networking.ClientTLSSettings_MUTUAL && t.CredentialName == "" {
		if t.ClientCertificate == "" {
			el.add(f+".clientCertificate", "is required for mode MUTUAL (the path of the client certificate on the sidecar's host)")
		}
		if t.PrivateKey == "" {
			el.add(f+".privateKey", "is required for mode MUTUAL (the path of the client key on the sidecar's host)")
		}
	}
	if t.Mode == networking.ClientTLSSettings_SIMPLE && (t.ClientCertificate != "" || t.PrivateKey != "") {
		el.add(f+".mode", "SIMPLE sends no client certificate: use MUTUAL with clientCertificate and privateKey, or remove them")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
