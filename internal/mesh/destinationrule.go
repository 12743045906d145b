package mesh

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// drIndex holds the DestinationRules by owning namespace and resolved
// host, and the merged rules computed from them. It is built once by
// Build and shared by snapshots that keep the same rules (UpdateEndpoints).
type drIndex struct {
	// Set by newDRIndex, read-only after.
	byNamespace map[string]map[string][]*istioconfig.Config // namespace → host → rules, by name
	rootNS      string
	defExport   []string // mesh defaultDestinationRuleExportTo

	mu     sync.Mutex                     // guards merged
	merged map[string]*istioconfig.Config // by the keys of the rules merged
}

func newDRIndex(rootNS string, defExport []string) *drIndex {
	return &drIndex{byNamespace: map[string]map[string][]*istioconfig.Config{}, rootNS: rootNS, defExport: defExport, merged: map[string]*istioconfig.Config{}}
}

func (x *drIndex) add(host string, c *istioconfig.Config) {
	hosts := x.byNamespace[c.Namespace]
	if hosts == nil {
		hosts = map[string][]*istioconfig.Config{}
		x.byNamespace[c.Namespace] = hosts
	}
	hosts[host] = append(hosts[host], c)
}

// visibleTo reports whether a rule exported by exportTo (mesh default
// when empty) from namespace owner may be used by a proxy in ns.
func visibleTo(exportTo, def []string, owner, ns string) bool {
	if len(exportTo) == 0 {
		exportTo = def
	}
	if len(exportTo) == 0 {
		return true
	}
	for _, e := range exportTo {
		if e == "*" || e == ns || (e == "." && ns == owner) {
			return true
		}
	}
	return false
}

// lookup is Istio's PushContext.destinationRule for exact hosts: the rules
// of the proxy's own namespace, else those the service's namespace exports
// to it, else those the root namespace exports to it. Several rules of the
// chosen namespace are merged (mergeDestinationRule).
func (x *drIndex) lookup(proxyNS, svcNS, host string) *istioconfig.Config {
	for _, owner := range []string{proxyNS, svcNS, x.rootNS} {
		if owner == "" {
			continue
		}
		var drs []*istioconfig.Config
		for _, c := range x.byNamespace[owner][host] {
			if visibleTo(c.DestinationRule().GetExportTo(), x.defExport, owner, proxyNS) {
				drs = append(drs, c)
			}
		}
		if len(drs) > 0 {
			return x.merge(drs)
		}
	}
	return nil
}

// any is the rule of host for a caller that has no proxy namespace: the
// first namespace (by name) with rules for host, merged.
func (x *drIndex) any(host string) *istioconfig.Config {
	namespaces := make([]string, 0, len(x.byNamespace))
	for ns, hosts := range x.byNamespace {
		if len(hosts[host]) > 0 {
			namespaces = append(namespaces, ns)
		}
	}
	if len(namespaces) == 0 {
		return nil
	}
	slices.Sort(namespaces)
	return x.merge(x.byNamespace[namespaces[0]][host])
}

// merge returns one rule, or the merge of several as Istio's
// mergeDestinationRule makes it: the first rule's spec, with the subsets
// of the later ones whose names it does not have yet appended, and the
// first traffic policy set. The merged config keeps the first rule's
// identity. The same rules give the same pointer within a snapshot.
func (x *drIndex) merge(drs []*istioconfig.Config) *istioconfig.Config {
	if len(drs) == 1 {
		return drs[0]
	}
	keys := make([]string, len(drs))
	for i, c := range drs {
		keys[i] = c.Namespace + "/" + c.Name
	}
	key := strings.Join(keys, ",")
	x.mu.Lock()
	defer x.mu.Unlock()
	if m, ok := x.merged[key]; ok {
		return m
	}
	spec := proto.Clone(drs[0].DestinationRule()).(*networking.DestinationRule)
	names := map[string]bool{}
	for _, ss := range spec.Subsets {
		names[ss.Name] = true
	}
	for _, c := range drs[1:] {
		dr := c.DestinationRule()
		for _, ss := range dr.GetSubsets() {
			if !names[ss.Name] {
				names[ss.Name] = true
				spec.Subsets = append(spec.Subsets, ss)
			}
		}
		if spec.TrafficPolicy == nil {
			spec.TrafficPolicy = dr.GetTrafficPolicy()
		}
		if len(spec.ExportTo) == 0 {
			spec.ExportTo = dr.GetExportTo()
		}
	}
	m := &istioconfig.Config{Meta: drs[0].Meta, Spec: spec}
	x.merged[key] = m
	return m
}

// buildDestinationRules indexes the store's DestinationRules. A rule with a
// workloadSelector is left out with a problem: it would apply to every
// proxy, which is wider than the user asked.
func (s *Snapshot) buildDestinationRules(store *istioconfig.Store, defExport []string) []error {
	var problems []error
	s.drs = newDRIndex(s.RootNamespace, defExport)
	for _, c := range store.List(istioconfig.KindDestinationRule) {
		if c.DestinationRule().GetWorkloadSelector() != nil {
			problems = append(problems, &istioconfig.FieldError{File: c.Source.File, Document: c.Source.Document, Field: "spec.workloadSelector",
				Problem: fmt.Sprintf("DestinationRule %s/%s: a rule with a workloadSelector is not supported by Strait yet; it is not applied", c.Namespace, c.Name)})
			continue
		}
		s.drs.add(s.ResolveHost(c.DestinationRule().Host, c.Namespace), c)
	}
	return problems
}

// DestinationRuleFor returns the DestinationRule that applies to host for
// a proxy in namespace proxyNS (exportTo and Istio's namespace order, see
// drIndex.lookup), merged when several apply; nil when none does.
func (s *Snapshot) DestinationRuleFor(proxyNS, host string) *istioconfig.Config {
	var svcNS string
	if svc := s.servicesByHost[host]; svc != nil {
		svcNS = svc.Namespace
	}
	return s.drs.lookup(proxyNS, svcNS, host)
}

// SubsetsFor returns the subsets of host's DestinationRule for a proxy in
// proxyNS, in the (merged) rule's order.
func (s *Snapshot) SubsetsFor(proxyNS, host string) []*networking.Subset {
	if dr := s.DestinationRuleFor(proxyNS, host); dr != nil {
		return dr.DestinationRule().GetSubsets()
	}
	return nil
}

// SubsetLabelsFor returns the labels of a named subset of host for a proxy
// in proxyNS.
func (s *Snapshot) SubsetLabelsFor(proxyNS, host, subset string) (map[string]string, bool) {
	for _, ss := range s.SubsetsFor(proxyNS, host) {
		if ss.Name == subset {
			return ss.Labels, true
		}
	}
	return nil, false
}
