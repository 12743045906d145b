package mesh

import (
	"cmp"
	"fmt"
	"slices"

	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// MTLSMode is the mutual TLS mode a PeerAuthentication gives a workload's
// inbound port (Istio's model.MutualTLSMode).
type MTLSMode int

const (
	// MTLSUnknown is what no policy says anything about (Istio then
	// means PERMISSIVE).
	MTLSUnknown MTLSMode = iota
	// MTLSDisable is plaintext only.
	MTLSDisable
	// MTLSPermissive is Istio mTLS and plaintext on the same port.
	MTLSPermissive
	// MTLSStrict is Istio mTLS only; a plaintext client is refused.
	MTLSStrict
)

func (m MTLSMode) String() string {
	switch m {
	case MTLSDisable:
		return "DISABLE"
	case MTLSPermissive:
		return "PERMISSIVE"
	case MTLSStrict:
		return "STRICT"
	}
	return "UNKNOWN"
}

// modeOf converts a PeerAuthentication mode; UNSET is MTLSUnknown.
func modeOf(m *security.PeerAuthentication_MutualTLS) MTLSMode {
	switch m.GetMode() {
	case security.PeerAuthentication_MutualTLS_DISABLE:
		return MTLSDisable
	case security.PeerAuthentication_MutualTLS_PERMISSIVE:
		return MTLSPermissive
	case security.PeerAuthentication_MutualTLS_STRICT:
		return MTLSStrict
	}
	return MTLSUnknown
}

// PeerPolicy is the PeerAuthentication in effect for one workload: a mode
// for its inbound ports, and the ports (the workload's own, target ports)
// that portLevelMtls sets apart.
type PeerPolicy struct {
	Mode    MTLSMode
	PerPort map[uint32]MTLSMode
}

// ForPort is the mode of one of the workload's ports.
func (p PeerPolicy) ForPort(port uint32) MTLSMode {
	if m, ok := p.PerPort[port]; ok {
		return m
	}
	return p.Mode
}

// peerAuthn is the snapshot's PeerAuthentications, as Istio's
// AuthenticationPolicies holds them (pilot/pkg/model/authentication.go).
// Immutable once built.
type peerAuthn struct {
	// byNamespace holds each namespace's policies, oldest first, with at
	// most one without a selector (the oldest: later ones are reported
	// and left out).
	byNamespace map[string][]*istioconfig.Config
	// namespaceMode is the mode of each namespace-wide policy, UNSET
	// resolved to the mesh's (or PERMISSIVE).
	namespaceMode map[string]MTLSMode
	// meshMode is the mode of the root namespace's selector-less policy
	// (UNSET there means PERMISSIVE); MTLSUnknown when there is none.
	meshMode MTLSMode
}

// olderFirst orders configs as Istio's configCompareByCreationTime: by
// creation time, then name, then namespace.
func olderFirst(a, b *istioconfig.Config) int {
	return cmp.Or(a.CreationTime.Compare(b.CreationTime), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace))
}

func hasSelector(pa *security.PeerAuthentication) bool {
	return len(pa.GetSelector().GetMatchLabels()) > 0
}

// buildPeerAuthn indexes the store's PeerAuthentications (Istio's
// addPeerAuthentication) and reports the ones that can never apply.
func buildPeerAuthn(store *istioconfig.Store, rootNamespace string) (*peerAuthn, []error) {
	p := &peerAuthn{byNamespace: map[string][]*istioconfig.Config{}, namespaceMode: map[string]MTLSMode{}}
	var problems []error
	configs := store.List(istioconfig.KindPeerAuthentication)
	slices.SortStableFunc(configs, olderFirst)
	wide := map[string]*istioconfig.Config{} // the namespace-wide policy kept, by namespace
	nsModes := map[string]MTLSMode{}
	for _, c := range configs {
		pa := c.PeerAuthentication()
		switch {
		case !hasSelector(pa):
			if prev, ok := wide[c.Namespace]; ok {
				problems = append(problems, &istioconfig.FieldError{File: c.Source.File, Document: c.Source.Document, Field: "metadata.name",
					Problem: fmt.Sprintf("namespace %s already has the older namespace-wide PeerAuthentication %s; this one is ignored (as in Istio, the oldest applies)", c.Namespace, prev.Name)})
				continue
			}
			wide[c.Namespace] = c
			mode := modeOf(pa.GetMtls())
			if c.Namespace == rootNamespace {
				p.meshMode = cmp.Or(mode, MTLSPermissive)
			} else {
				nsModes[c.Namespace] = mode
			}
		case c.Namespace == rootNamespace:
			problems = append(problems, &istioconfig.FieldError{File: c.Source.File, Document: c.Source.Document, Field: "spec.selector",
				Problem: fmt.Sprintf("a PeerAuthentication with a selector in the root namespace %s applies to no workload (as in Istio); put it in the workload's namespace", rootNamespace)})
			continue
		}
		p.byNamespace[c.Namespace] = append(p.byNamespace[c.Namespace], c)
	}
	inherited := cmp.Or(p.meshMode, MTLSPermissive)
	for ns, mode := range nsModes {
		p.namespaceMode[ns] = cmp.Or(mode, inherited)
	}
	return p, problems
}

// NamespaceMTLSMode is the mode a namespace-wide PeerAuthentication of ns
// sets, else the mesh-wide one's, else MTLSUnknown (Istio's
// GetNamespaceMutualTLSMode). Client sidecars decide auto mTLS from it:
// Istio does not look at a destination's workload policies there.
func (s *Snapshot) NamespaceMTLSMode(ns string) MTLSMode {
	if s.peerAuthn == nil {
		return MTLSUnknown
	}
	if m, ok := s.peerAuthn.namespaceMode[ns]; ok {
		return m
	}
	return s.peerAuthn.meshMode
}

// PeerAuthentication is the policy in effect for a workload of namespace
// ns with these labels, composed as Istio's ComposePeerAuthentication
// does: the most specific scope that sets a mode wins (the oldest workload
// policy whose selector the labels satisfy, then the namespace's, then the
// root namespace's), UNSET inherits from the scope above, PERMISSIVE when
// nothing is set; a port-level UNSET is the workload's mode.
func (s *Snapshot) PeerAuthentication(ns string, labels map[string]string) PeerPolicy {
	out := PeerPolicy{Mode: MTLSPermissive}
	if s.peerAuthn == nil {
		return out
	}
	var meshCfg, nsCfg, workloadCfg *istioconfig.Config
	for _, look := range []string{s.RootNamespace, ns} {
		for _, c := range s.peerAuthn.byNamespace[look] {
			pa := c.PeerAuthentication()
			switch {
			case !hasSelector(pa) && c.Namespace == s.RootNamespace:
				if meshCfg == nil {
					meshCfg = c
				}
			case !hasSelector(pa):
				if nsCfg == nil {
					nsCfg = c
				}
			case c.Namespace == ns && workloadCfg == nil && labelsMatch(pa.GetSelector().GetMatchLabels(), labels):
				workloadCfg = c // the oldest: byNamespace is oldest first
			}
		}
		if ns == s.RootNamespace {
			break
		}
	}
	for _, c := range []*istioconfig.Config{meshCfg, nsCfg, workloadCfg} {
		if c == nil {
			continue
		}
		if m := modeOf(c.PeerAuthentication().GetMtls()); m != MTLSUnknown {
			out.Mode = m
		}
	}
	if workloadCfg == nil {
		return out
	}
	if ports := workloadCfg.PeerAuthentication().GetPortLevelMtls(); len(ports) > 0 {
		out.PerPort = make(map[uint32]MTLSMode, len(ports))
		for port, m := range ports {
			out.PerPort[port] = cmp.Or(modeOf(m), out.Mode)
		}
	}
	return out
}
