package validate

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// DryRunAnnotation makes an AuthorizationPolicy evaluated and reported
// but not enforced (Istio's annotation).
const DryRunAnnotation = "istio.io/dry-run"

// authzWhenKeys are the `when` keys Istio defines (pilot/pkg/security/
// authz/model: the attr* constants); request.headers[NAME] and
// request.auth.claims[NAME]... take a name in brackets.
var authzWhenKeys = map[string]bool{
	"source.ip": true, "remote.ip": true, "source.namespace": true, "source.serviceAccount": true,
	"source.trustDomain": true, "source.principal": true, "request.auth.principal": true,
	"request.auth.audiences": true, "request.auth.presenter": true, "destination.ip": true,
	"destination.port": true, "connection.sni": true,
}

// validateAuthorizationPolicy checks what Istio's validation checks and
// what the translation relies on: sources and operations are not empty,
// `when` keys are known and have values, addresses and ports parse, and
// the dry-run annotation is a boolean, and path templates ({*}, {**}) are
// well formed. The experimental.envoy.filters.* keys are refused as not
// supported yet.
func validateAuthorizationPolicy(el *fielderr.List, annotations map[string]string, p *security.AuthorizationPolicy) {
	if v, ok := annotations[DryRunAnnotation]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			el.Add("metadata.annotations["+DryRunAnnotation+"]", "%q is not a boolean (want \"true\" or \"false\")", v)
		}
	}
	if p.Selector != nil {
		validateLabels(el, "spec.selector.matchLabels", p.Selector.MatchLabels)
	}
	validateOneSelector(el, p.Selector != nil, p.TargetRef != nil, len(p.TargetRefs) > 0)
	if p.Action == security.AuthorizationPolicy_DENY && p.Rules == nil {
		// A DENY policy without rules matches nothing; Istio refuses it
		// rather than let it look like a deny-all.
		el.Add("spec.rules", "DENY action without rules is meaningless as it will never be triggered; add an empty rule {} to deny every request")
	}
	if p.GetProvider() != nil && p.Action != security.AuthorizationPolicy_CUSTOM {
		el.Add("spec.provider", "must not be set with action %s (only with CUSTOM)", p.Action)
	}
	for i, r := range p.Rules {
		rf := fmt.Sprintf("spec.rules[%d]", i)
		if r == nil {
			el.Add(rf, "must not be null")
			continue
		}
		for j, from := range r.From {
			f := fmt.Sprintf("%s.from[%d].source", rf, j)
			s := from.GetSource()
			if s == nil {
				el.Add(f, "must be set")
				continue
			}
			n := 0
			for _, l := range []struct {
				name string
				vs   []string
				ip   bool
			}{
				{"principals", s.Principals, false}, {"notPrincipals", s.NotPrincipals, false},
				{"requestPrincipals", s.RequestPrincipals, false}, {"notRequestPrincipals", s.NotRequestPrincipals, false},
				{"namespaces", s.Namespaces, false}, {"notNamespaces", s.NotNamespaces, false},
				{"serviceAccounts", s.ServiceAccounts, false}, {"notServiceAccounts", s.NotServiceAccounts, false},
				{"trustDomains", s.TrustDomains, false}, {"notTrustDomains", s.NotTrustDomains, false},
				{"ipBlocks", s.IpBlocks, true}, {"notIpBlocks", s.NotIpBlocks, true},
				{"remoteIpBlocks", s.RemoteIpBlocks, true}, {"notRemoteIpBlocks", s.NotRemoteIpBlocks, true},
			} {
				n += len(l.vs)
				validateAuthzValues(el, f+"."+l.name, l.vs, l.ip)
			}
			if n == 0 {
				el.Add(f, "must set at least one field (e.g. principals or namespaces)")
			}
			if len(s.Principals)+len(s.NotPrincipals)+len(s.Namespaces)+len(s.NotNamespaces) > 0 &&
				len(s.ServiceAccounts)+len(s.NotServiceAccounts) > 0 {
				el.Add(f, "cannot set serviceAccounts with namespaces or principals (serviceAccounts takes NAMESPACE/NAME)")
			}
			for _, l := range []struct {
				name string
				vs   []string
			}{{"serviceAccounts", s.ServiceAccounts}, {"notServiceAccounts", s.NotServiceAccounts}} {
				validateServiceAccounts(el, f+"."+l.name, l.vs)
			}
			for _, l := range []struct {
				name string
				vs   []string
			}{{"trustDomains", s.TrustDomains}, {"notTrustDomains", s.NotTrustDomains}} {
				validateWildcards(el, f+"."+l.name, l.vs)
				for k, v := range l.vs {
					if strings.Contains(v, "/") {
						el.Add(fmt.Sprintf("%s.%s[%d]", f, l.name, k), "%q: a trust domain must not contain '/'", v)
					}
				}
			}
		}
		for j, to := range r.To {
			f := fmt.Sprintf("%s.to[%d].operation", rf, j)
			o := to.GetOperation()
			if o == nil {
				el.Add(f, "must be set")
				continue
			}
			if len(o.Hosts)+len(o.NotHosts)+len(o.Ports)+len(o.NotPorts)+len(o.Methods)+len(o.NotMethods)+len(o.Paths)+len(o.NotPaths) == 0 {
				el.Add(f, "must set at least one field (e.g. paths or ports)")
			}
			for _, l := range []struct {
				name string
				vs   []string
			}{{"hosts", o.Hosts}, {"notHosts", o.NotHosts}, {"methods", o.Methods}, {"notMethods", o.NotMethods}} {
				validateAuthzValues(el, f+"."+l.name, l.vs, false)
			}
			for _, l := range []struct {
				name string
				vs   []string
			}{{"ports", o.Ports}, {"notPorts", o.NotPorts}} {
				for k, v := range l.vs {
					validateAuthzPort(el, fmt.Sprintf("%s.%s[%d]", f, l.name, k), v)
				}
			}
			for _, l := range []struct {
				name string
				vs   []string
			}{{"paths", o.Paths}, {"notPaths", o.NotPaths}} {
				validateAuthzValues(el, f+"."+l.name, l.vs, false)
				for k, v := range l.vs {
					if err := checkPathTemplate(v); err != nil {
						el.AddErr(fmt.Sprintf("%s.%s[%d]", f, l.name, k), err)
					}
				}
			}
		}
		for j, w := range r.When {
			f := fmt.Sprintf("%s.when[%d]", rf, j)
			validateAuthzWhen(el, f, w)
		}
	}
}

func validateAuthzWhen(el *fielderr.List, f string, w *security.Condition) {
	k := w.GetKey()
	switch {
	case k == "":
		el.Add(f+".key", "must be set")
		return
	case strings.HasPrefix(k, "experimental.envoy.filters."):
		el.AddErr(f+".key", fmt.Errorf("%q %w", k, fielderr.ErrNotSupported))
		return
	case strings.HasPrefix(k, "request.headers"):
		name, ok := strings.CutPrefix(k, "request.headers[")
		if !ok || !strings.HasSuffix(name, "]") || len(name) == 1 {
			el.Add(f+".key", "%q: want request.headers[NAME]", k)
		}
	case strings.HasPrefix(k, "request.auth.claims"):
		rest, ok := strings.CutPrefix(k, "request.auth.claims[")
		if !ok || !strings.HasSuffix(rest, "]") || len(rest) == 1 {
			el.Add(f+".key", "%q: want request.auth.claims[NAME] (nested: [A][B])", k)
		}
	case !authzWhenKeys[k]:
		el.Add(f+".key", "%q is not a known key (e.g. request.headers[NAME], source.ip, source.namespace, destination.port)", k)
		return
	}
	if len(w.Values)+len(w.NotValues) == 0 {
		el.Add(f, "must set values or notValues")
	}
	ip := k == "source.ip" || k == "remote.ip" || k == "destination.ip"
	validateAuthzValues(el, f+".values", w.Values, ip)
	validateAuthzValues(el, f+".notValues", w.NotValues, ip)
	switch k {
	case "source.serviceAccount":
		validateServiceAccounts(el, f+".values", w.Values)
		validateServiceAccounts(el, f+".notValues", w.NotValues)
	case "source.trustDomain":
		validateWildcards(el, f+".values", w.Values)
		validateWildcards(el, f+".notValues", w.NotValues)
	}
	if k == "destination.port" {
		for i, v := range append(append([]string(nil), w.Values...), w.NotValues...) {
			validateAuthzPort(el, fmt.Sprintf("%s.values[%d]", f, i), v)
		}
	}
}

func validateAuthzValues(el *fielderr.List, f string, vs []string, ip bool) {
	for i, v := range vs {
		if v == "" {
			el.Add(fmt.Sprintf("%s[%d]", f, i), "must not be empty")
			continue
		}
		if ip {
			if _, err := netip.ParsePrefix(v); err != nil {
				if _, err := netip.ParseAddr(v); err != nil {
					el.Add(fmt.Sprintf("%s[%d]", f, i), "%q is not an IP address or CIDR (e.g. 10.0.0.0/16)", v)
				}
			}
		}
	}
}

// validateOneSelector is Istio's validateOneOfSelectorType: a policy
// picks its workloads by selector, targetRef or targetRefs, never two.
func validateOneSelector(el *fielderr.List, selector, targetRef, targetRefs bool) {
	n := 0
	for _, set := range []bool{selector, targetRef, targetRefs} {
		if set {
			n++
		}
	}
	if n > 1 {
		el.Add("spec", "only one of selector, targetRef or targetRefs can be set")
	}
}

// maxServiceAccounts is Istio's bound on one serviceAccounts list
// (pkg/config/security: CheckServiceAccount).
const maxServiceAccounts = 16

// validateServiceAccounts applies Istio's CheckServiceAccount: at most 16
// values, each NAME or NAMESPACE/NAME, no wildcard.
func validateServiceAccounts(el *fielderr.List, f string, vs []string) {
	if len(vs) > maxServiceAccounts {
		el.Add(f, "has %d values; at most %d are allowed", len(vs), maxServiceAccounts)
	}
	for i, v := range vs {
		ns, sa, hasNS := strings.Cut(v, "/")
		switch {
		case v == "":
			continue // reported by the caller's empty-value check
		case strings.Contains(v, "*"):
			el.Add(fmt.Sprintf("%s[%d]", f, i), "%q: wildcards are not allowed in service accounts", v)
		case strings.Count(v, "/") > 1 || (hasNS && (ns == "" || sa == "")):
			el.Add(fmt.Sprintf("%s[%d]", f, i), "%q: want NAME or NAMESPACE/NAME", v)
		}
	}
}

// validateWildcards applies Istio's CheckWildcardValues: one "*" at most,
// and only as the whole value, at the start or at the end.
func validateWildcards(el *fielderr.List, f string, vs []string) {
	for i, v := range vs {
		n := strings.Count(v, "*")
		switch {
		case v == "":
			continue // reported by the caller's empty-value check
		case n > 1:
			el.Add(fmt.Sprintf("%s[%d]", f, i), "%q: at most one wildcard is allowed", v)
		case n == 1 && v != "*" && !strings.HasPrefix(v, "*") && !strings.HasSuffix(v, "*"):
			el.Add(fmt.Sprintf("%s[%d]", f, i), "%q: a wildcard is only allowed at the start or the end", v)
		}
	}
}

func validateAuthzPort(el *fielderr.List, f, v string) {
	if n, err := strconv.ParseUint(v, 10, 32); err != nil || n > 65535 {
		el.Add(f, "%q is not a port (0 to 65535)", v)
	}
}

// Istio's path template operators (pkg/config/security: MatchOneTemplate
// and MatchAnyTemplate).
const (
	pathTemplateOne = "{*}"
	pathTemplateAny = "{**}"
)

// pathTemplateLiteral is what a path segment may hold beside a template:
// RFC 3986 pchar without "*" and "=", as Envoy's uri_template matcher
// requires of a literal.
var pathTemplateLiteral = regexp.MustCompile(`^[a-zA-Z0-9\-._~%!$&'()+,;:@]+$`)

// ContainsPathTemplate reports whether an AuthorizationPolicy path uses a
// template ({*} or {**}) and so is matched by Envoy's uri_template
// matcher rather than as an exact, prefix or suffix path.
func ContainsPathTemplate(path string) bool {
	return strings.Contains(path, pathTemplateOne) || strings.Contains(path, pathTemplateAny)
}

// checkPathTemplate applies Istio's CheckValidPathTemplate
// (pkg/config/security/security.go) to one path: "{" and "}" appear only
// as whole {*} or {**} segments, no template follows {**}, and in a path
// with a template every other segment is a literal. It also requires the
// leading "/" that Envoy's matcher needs, which Istio leaves to Envoy.
func checkPathTemplate(path string) error {
	if !ContainsPathTemplate(path) {
		if strings.ContainsAny(path, "{}") {
			return fmt.Errorf("path %q: \"{\" and \"}\" are only allowed in the path templates {*} (one segment) and {**} (any number of segments)", path)
		}
		return nil
	}
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("path template %q must start with \"/\" (e.g. \"/api/{*}/info\")", path)
	}
	anySeen := false
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		switch {
		case (seg == pathTemplateOne || seg == pathTemplateAny) && anySeen:
			return fmt.Errorf("path template %q: {**} must be the last template (found %s after it)", path, seg)
		case seg == pathTemplateAny:
			anySeen = true
		case seg == pathTemplateOne:
		case strings.ContainsAny(seg, "{}"):
			return fmt.Errorf("path template %q: segment %q must be exactly {*} or {**}, or a literal without \"{\" and \"}\"", path, seg)
		case !pathTemplateLiteral.MatchString(seg):
			return fmt.Errorf("path template %q: segment %q is not a literal (letters, digits and -._~%%!$&'()+,;:@; no \"*\" wildcard or empty segment beside a template)", path, seg)
		}
	}
	return nil
}
