package mesh

import (
	"fmt"
	"maps"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// mergeDelegates returns the VirtualServices as the generators use them:
// a delegate (a VirtualService without hosts) is left out, and a root
// (one whose http routes name a delegate) becomes a copy in which each
// such route is replaced by the delegate's routes merged under it, as
// Istio's mergeVirtualServices does. A delegate that is missing or not
// exported to the root's namespace drops only the route that names it;
// a delegate route whose match conflicts with the root's is dropped.
// Each dropped route is reported.
func (s *Snapshot) mergeDelegates(vss []*istioconfig.Config, defExport []string) ([]*istioconfig.Config, []error) {
	delegates := map[string]*istioconfig.Config{}
	for _, c := range vss {
		if len(c.VirtualService().GetHosts()) == 0 {
			delegates[c.Namespace+"/"+c.Name] = c
		}
	}
	var (
		out      []*istioconfig.Config
		problems []error
	)
	for _, c := range vss {
		spec := c.VirtualService()
		if len(spec.GetHosts()) == 0 {
			continue
		}
		if !isRoot(spec) {
			out = append(out, c)
			continue
		}
		merged := proto.Clone(spec).(*networking.VirtualService)
		merged.Http = nil
		for i, route := range spec.GetHttp() {
			d := route.GetDelegate()
			if d == nil {
				merged.Http = append(merged.Http, route)
				continue
			}
			ns := d.GetNamespace()
			if ns == "" {
				ns = c.Namespace
			}
			field := fmt.Sprintf("spec.http[%d].delegate", i)
			dc := delegates[ns+"/"+d.GetName()]
			switch {
			case dc == nil:
				problems = append(problems, s.problem(c, field, fmt.Sprintf("VirtualService %s/%s not found (or it has hosts); this route is left out", ns, d.GetName())))
				continue
			case !visibleTo(dc.VirtualService().GetExportTo(), defExport, dc.Namespace, c.Namespace):
				problems = append(problems, s.problem(c, field, fmt.Sprintf("VirtualService %s/%s is not exported to namespace %s; this route is left out", ns, d.GetName(), c.Namespace)))
				continue
			}
			for j, sub := range dc.VirtualService().GetHttp() {
				m := s.mergeHTTPRoute(route, sub, dc.Namespace)
				if m == nil {
					problems = append(problems, s.problem(c, field, fmt.Sprintf("route %d of VirtualService %s/%s matches outside this route's match; it is left out", j, ns, d.GetName())))
					continue
				}
				merged.Http = append(merged.Http, m)
			}
		}
		out = append(out, &istioconfig.Config{Meta: c.Meta, Spec: merged})
	}
	return out, problems
}

func (s *Snapshot) problem(c *istioconfig.Config, field, problem string) error {
	return &istioconfig.FieldError{File: c.Source.File, Document: c.Source.Document, Field: field, Problem: problem}
}

func isRoot(vs *networking.VirtualService) bool {
	for _, r := range vs.GetHttp() {
		if r.GetDelegate() != nil {
			return true
		}
	}
	return false
}

// mergeHTTPRoute is Istio's mergeHTTPRoute: the delegate's route with its
// matches narrowed by the root's, and the root's settings where the
// delegate has none; nil when the matches conflict. The delegate's short
// destination hosts are resolved in its own namespace, since the merged
// route lives in the root's.
func (s *Snapshot) mergeHTTPRoute(root, delegate *networking.HTTPRoute, delegateNS string) *networking.HTTPRoute {
	out := proto.Clone(delegate).(*networking.HTTPRoute)
	matches, conflict := mergeHTTPMatches(root.GetMatch(), out.GetMatch())
	if conflict {
		return nil
	}
	out.Match = matches
	for _, d := range out.GetRoute() {
		if d.GetDestination() != nil {
			d.Destination.Host = s.ResolveHost(d.Destination.Host, delegateNS)
		}
	}
	if out.GetMirror() != nil {
		out.Mirror.Host = s.ResolveHost(out.Mirror.Host, delegateNS)
	}
	for _, m := range out.GetMirrors() {
		if m.GetDestination() != nil {
			m.Destination.Host = s.ResolveHost(m.Destination.Host, delegateNS)
		}
	}
	switch {
	case out.Name == "":
		out.Name = root.GetName()
	case root.GetName() != "":
		out.Name = root.GetName() + "-" + out.Name
	}
	if out.Rewrite == nil {
		out.Rewrite = root.Rewrite
	}
	if out.DirectResponse == nil {
		out.DirectResponse = root.DirectResponse
	}
	if out.Timeout == nil {
		out.Timeout = root.Timeout
	}
	if out.Retries == nil {
		out.Retries = root.Retries
	}
	if out.Fault == nil {
		out.Fault = root.Fault
	}
	if out.Mirror == nil {
		out.Mirror = root.Mirror
	}
	if out.MirrorPercentage == nil {
		out.MirrorPercentage = root.MirrorPercentage
	}
	if out.CorsPolicy == nil {
		out.CorsPolicy = root.CorsPolicy
	}
	if out.Mirrors == nil {
		out.Mirrors = root.Mirrors
	}
	if out.Headers == nil {
		out.Headers = root.Headers
	}
	return out
}

// mergeHTTPMatches is Istio's mergeHTTPMatchRequests: every delegate
// match must be narrower than at least one root match; the result has one
// merged match per such pair.
func mergeHTTPMatches(root, delegate []*networking.HTTPMatchRequest) ([]*networking.HTTPMatchRequest, bool) {
	if len(root) == 0 {
		return delegate, false
	}
	if len(delegate) == 0 {
		return root, false
	}
	var out []*networking.HTTPMatchRequest
	for _, sub := range delegate {
		found := false
		for _, r := range root {
			if matchConflict(r, sub) {
				continue
			}
			out = append(out, mergeHTTPMatch(r, sub))
			found = true
		}
		if !found {
			return nil, true
		}
	}
	return out, len(out) == 0
}

func mergeHTTPMatch(root, delegate *networking.HTTPMatchRequest) *networking.HTTPMatchRequest {
	out := proto.Clone(delegate).(*networking.HTTPMatchRequest)
	switch {
	case out.Name == "":
		out.Name = root.Name
	case root.Name != "":
		out.Name = root.Name + "-" + out.Name
	}
	if out.Uri == nil {
		out.Uri = root.Uri
	}
	if out.Scheme == nil {
		out.Scheme = root.Scheme
	}
	if out.Method == nil {
		out.Method = root.Method
	}
	if out.Authority == nil {
		out.Authority = root.Authority
	}
	out.Headers = mergeMaps(root.Headers, delegate.Headers)
	out.WithoutHeaders = mergeMaps(root.WithoutHeaders, delegate.WithoutHeaders)
	out.QueryParams = mergeMaps(root.QueryParams, delegate.QueryParams)
	out.SourceLabels = mergeMaps(root.SourceLabels, delegate.SourceLabels)
	if out.Port == 0 {
		out.Port = root.Port
	}
	if out.SourceNamespace == "" {
		out.SourceNamespace = root.SourceNamespace
	}
	if len(out.Gateways) == 0 {
		out.Gateways = root.Gateways
	}
	if out.StatPrefix == "" {
		out.StatPrefix = root.StatPrefix
	}
	return out
}

// mergeMaps is a copy of a with b's entries over it (nil when both are
// empty).
func mergeMaps[V any](a, b map[string]V) map[string]V {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]V{}
	}
	maps.Copy(out, b)
	return out
}

// matchConflict is Istio's hasConflict: the delegate match (leaf) may only
// narrow the root's.
func matchConflict(root, leaf *networking.HTTPMatchRequest) bool {
	pairs := [][2]*networking.StringMatch{{root.Uri, leaf.Uri}, {root.Scheme, leaf.Scheme}, {root.Method, leaf.Method}, {root.Authority, leaf.Authority}}
	for k, v := range leaf.Headers {
		pairs = append(pairs, [2]*networking.StringMatch{root.Headers[k], v})
	}
	for k, v := range leaf.WithoutHeaders {
		pairs = append(pairs, [2]*networking.StringMatch{root.WithoutHeaders[k], v})
	}
	for k, v := range leaf.QueryParams {
		pairs = append(pairs, [2]*networking.StringMatch{root.QueryParams[k], v})
	}
	for _, p := range pairs {
		if stringMatchConflict(p[0], p[1]) {
			return true
		}
	}
	if root.IgnoreUriCase != leaf.IgnoreUriCase {
		return true
	}
	if root.Port > 0 && leaf.Port > 0 && root.Port != leaf.Port {
		return true
	}
	if root.SourceNamespace != "" && leaf.SourceNamespace != root.SourceNamespace {
		return true
	}
	for k, v := range leaf.SourceLabels {
		if rv, ok := root.SourceLabels[k]; ok && rv != v {
			return true
		}
	}
	if len(root.Gateways) > 0 && len(leaf.Gateways) > 0 {
		for _, g := range leaf.Gateways {
			found := false
			for _, rg := range root.Gateways {
				found = found || rg == g
			}
			if !found {
				return true
			}
		}
	}
	return false
}

// stringMatchConflict is Istio's: no conflict when either side is unset;
// a regex only goes with an unset other side; an exact root takes only the
// same exact; a prefix root takes an exact or prefix that starts with it.
func stringMatchConflict(root, leaf *networking.StringMatch) bool {
	if root == nil || leaf == nil {
		return false
	}
	if root.GetRegex() != "" || leaf.GetRegex() != "" {
		return true
	}
	if exact := root.GetExact(); exact != "" {
		return leaf.GetExact() != exact
	}
	if prefix := root.GetPrefix(); prefix != "" {
		switch {
		case leaf.GetPrefix() != "":
			return !strings.HasPrefix(leaf.GetPrefix(), prefix)
		case leaf.GetExact() != "":
			return !strings.HasPrefix(leaf.GetExact(), prefix)
		}
	}
	return true
}
