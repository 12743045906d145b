package gen

import (
	"slices"
	"sort"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/locality"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// networkLabel is the endpoint label Istio's failoverPriority treats
// specially when it comes first (label.TopologyNetwork).
const networkLabel = "topology.istio.io/network"

// proxyLocality is where a proxy runs: the locality its node sent, else
// its WorkloadEntry's (Istio's istiod likewise takes a proxy's locality
// from the registry when the node has none).
func proxyLocality(snap *mesh.Snapshot, proxy *proxypush.Proxy) string {
	if proxy == nil {
		return ""
	}
	if proxy.Locality != "" {
		return proxy.Locality
	}
	if w := snap.WorkloadByIP(proxy.IP); w != nil {
		return w.Locality
	}
	return ""
}

// effectiveLocalityLb is the locality load balancing setting of a
// destination, as Istio's loadbalancer.GetEffectiveLbSetting resolves it
// (without zone-aware routing and traffic distribution, which Strait
// refuses): the DestinationRule's, else the mesh's; nil when disabled.
func effectiveLocalityLb(m *meshconfig.Config, lb *networking.LoadBalancerSettings) *networking.LocalityLoadBalancerSetting {
	if s := lb.GetLocalityLbSetting(); s != nil {
		if e := s.GetEnabled(); e != nil && !e.GetValue() {
			return nil
		}
		return s
	}
	if m == nil {
		m = meshconfig.Default()
	}
	return m.LocalityLbSetting
}

// applyLocalityLbConfig is the cluster half of Istio's
// LocalityLBSettings.ApplyToCluster: locality_weighted_lb_config when the
// load assignment will carry locality weights or failover by explicit
// rules (failover only with outlier detection: without it no host is ever
// unhealthy and a lower priority never serves).
func applyLocalityLbConfig(c *cluster.Cluster, p *networking.TrafficPolicy, m *meshconfig.Config) {
	if c.GetType() == cluster.Cluster_ORIGINAL_DST || c.LbPolicy == cluster.Cluster_CLUSTER_PROVIDED {
		return
	}
	s := effectiveLocalityLb(m, p.GetLoadBalancer())
	if s == nil {
		return
	}
	failover := c.OutlierDetection != nil && (len(s.GetFailover()) > 0 || len(s.GetFailoverPriority()) > 0)
	if failover || len(s.GetDistribute()) > 0 {
		if c.CommonLbConfig == nil {
			c.CommonLbConfig = &cluster.Cluster_CommonLbConfig{}
		}
		c.CommonLbConfig.LocalityConfigSpecifier = &cluster.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
			LocalityWeightedLbConfig: &cluster.Cluster_CommonLbConfig_LocalityWeightedLbConfig{},
		}
	}
}

// localityView is what a load assignment depends on besides its cluster:
// the destination's locality setting and the proxy it goes to.
type localityView struct {
	setting  *networking.LocalityLoadBalancerSetting
	failover bool // the destination has outlier detection
	proxy    locality.Locality
	labels   map[string]string // the proxy's, for failoverPriority
}

// newLocalityView is the view of the proxy for host's cluster of subset and
// port, with its cache key (empty when the assignment is the same for
// every proxy); nil when no locality setting applies.
func newLocalityView(snap *mesh.Snapshot, ns string, proxy *proxypush.Proxy, host, subset string, port uint32) (*localityView, string) {
	p := trafficPolicyFor(snap, ns, host, subset, port)
	s := effectiveLocalityLb(snap.Mesh, p.GetLoadBalancer())
	if s == nil {
		return nil, ""
	}
	v := &localityView{setting: s, failover: p.GetOutlierDetection() != nil, proxy: locality.Parse(proxyLocality(snap, proxy))}
	key := v.proxy.String()
	if v.failover && len(s.GetDistribute()) == 0 && len(s.GetFailoverPriority()) > 0 {
		v.labels, _ = proxyLabels(snap, proxy)
		var b strings.Builder
		for _, l := range s.GetFailoverPriority() {
			name, _, _ := strings.Cut(l, "=")
			b.WriteString("|" + name + "=" + v.labels[name])
		}
		key += b.String()
	}
	return v, key
}

// localityGroup is one LocalityLbEndpoints with the endpoints it was made
// from (for failoverPriority's label matches).
type localityGroup struct {
	lle *endpoint.LocalityLbEndpoints
	eps []*mesh.Endpoint
}

// groupByLocality puts the endpoints into one LocalityLbEndpoints per
// locality, sorted by locality, each weighted by the sum of its endpoints'
// weights (Istio's EndpointBuilder.generate).
func groupByLocality(lbs []*endpoint.LbEndpoint, eps []*mesh.Endpoint) []*localityGroup {
	byName := map[string]*localityGroup{}
	var names []string
	for i, lb := range lbs {
		name := eps[i].Locality
		g := byName[name]
		if g == nil {
			l := locality.Parse(name)
			g = &localityGroup{lle: &endpoint.LocalityLbEndpoints{
				Locality: &core.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.Subzone},
			}}
			byName[name] = g
			names = append(names, name)
		}
		g.lle.LbEndpoints = append(g.lle.LbEndpoints, lb)
		g.eps = append(g.eps, eps[i])
	}
	slices.Sort(names)
	out := make([]*localityGroup, 0, len(names))
	for _, n := range names {
		g := byName[n]
		g.lle.LoadBalancingWeight = wrapperspb.UInt32(sumWeights(g.lle.LbEndpoints))
		out = append(out, g)
	}
	return out
}

func sumWeights(lbs []*endpoint.LbEndpoint) uint32 {
	var w uint32
	for _, lb := range lbs {
		w += lb.GetLoadBalancingWeight().GetValue()
	}
	return w
}

// apply sets the groups' priorities or weights relative to the proxy, as
// Istio's ApplyLocalityLoadBalancer: distribute weights the localities; or,
// with outlier detection, failoverPriority and failover rank them.
func (v *localityView) apply(groups []*localityGroup) []*localityGroup {
	s := v.setting
	switch {
	case len(s.GetDistribute()) > 0:
		v.applyWeights(groups)
	case !v.failover:
	case len(s.GetFailoverPriority()) > 0:
		if len(v.labels) > 0 {
			groups = v.applyFailoverPriority(groups)
			if len(s.GetFailover()) > 0 {
				v.applyFailover(groups)
			}
		}
	default:
		v.applyFailover(groups)
	}
	return groups
}

// applyWeights is Istio's applyLocalityWeights: the first distribute entry
// whose from matches the proxy gives each matching locality its share
// (split among the localities a wildcard matches by their weights), and
// empties the localities it does not name.
func (v *localityView) applyWeights(groups []*localityGroup) {
	for _, d := range v.setting.GetDistribute() {
		if !v.proxy.Matches(d.GetFrom()) {
			continue
		}
		unmatched := make([]bool, len(groups))
		for i := range unmatched {
			unmatched[i] = true
		}
		to := make([]string, 0, len(d.GetTo()))
		for k := range d.GetTo() {
			to = append(to, k)
		}
		slices.Sort(to) // Istio walks a map; sorted, the result is stable
		for _, pattern := range to {
			share := d.GetTo()[pattern]
			var matched []int
			var total uint32
			for i, g := range groups {
				if unmatched[i] && localityOf(g.lle).Matches(pattern) {
					unmatched[i] = false
					matched = append(matched, i)
					total += g.lle.GetLoadBalancingWeight().GetValue()
				}
			}
			for _, i := range matched {
				w := uint64(groups[i].lle.GetLoadBalancingWeight().GetValue()) * uint64(share)
				if w > 0 {
					groups[i].lle.LoadBalancingWeight = wrapperspb.UInt32(uint32((w + uint64(total) - 1) / uint64(total)))
				}
			}
		}
		for i, g := range groups {
			if unmatched[i] {
				g.lle.LbEndpoints = nil
				g.eps = nil
			}
		}
		return
	}
}

func localityOf(lle *endpoint.LocalityLbEndpoints) locality.Locality {
	l := lle.GetLocality()
	return locality.Locality{Region: l.GetRegion(), Zone: l.GetZone(), Subzone: l.GetSubZone()}
}

// applyFailover is Istio's applyLocalityFailover: priority 0 for the
// proxy's subzone, 1 its zone, 2 its region, 3 the region a failover rule
// names for the proxy's region (4 for other regions when a rule names
// one), composed with priorities already set, then renumbered 0..N.
func (v *localityView) applyFailover(groups []*localityGroup) {
	prio := make([]int, len(groups))
	for i, g := range groups {
		p := locality.Priority(v.proxy, localityOf(g.lle))
		if p == 3 {
			for _, f := range v.setting.GetFailover() {
				if f.GetFrom() == v.proxy.Region {
					if g.lle.GetLocality().GetRegion() != f.GetTo() {
						p = 4
					}
					break
				}
			}
		}
		prio[i] = int(g.lle.GetPriority())*5 + p
	}
	compact(groups, prio)
}

// compact gives the groups the rank of their priority among the distinct
// values of prio, so that priorities run from 0 without gaps.
func compact(groups []*localityGroup, prio []int) {
	distinct := slices.Clone(prio)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	for i, g := range groups {
		rank, _ := slices.BinarySearch(distinct, prio[i])
		g.lle.Priority = uint32(rank)
	}
}

// applyFailoverPriority is Istio's applyFailoverPriorities: each locality
// splits by how many of the failoverPriority labels (in order) its
// endpoints share with the proxy, the more the higher the priority.
func (v *localityView) applyFailoverPriority(groups []*localityGroup) []*localityGroup {
	labels := v.setting.GetFailoverPriority()
	names := make([]string, len(labels))
	override := map[string]string{}
	for i, l := range labels {
		name, value, ok := strings.Cut(l, "=")
		names[i] = name
		if ok {
			override[name] = value
		}
	}
	lowest := len(labels)
	includesNetwork := len(names) > 0 && names[0] == networkLabel
	var out []*localityGroup
	var prio []int
	for _, g := range groups {
		byPrio := map[int]*localityGroup{}
		for i, ep := range g.eps {
			p, adjust := 0, 0
			for j, name := range names {
				want, ok := override[name]
				if !ok {
					want = v.labels[name]
				}
				if want != ep.Labels[name] {
					if j == 0 && includesNetwork {
						adjust = lowest
						continue
					}
					p = lowest - j
					break
				}
			}
			p += adjust
			ng := byPrio[p]
			if ng == nil {
				ng = &localityGroup{lle: &endpoint.LocalityLbEndpoints{Locality: g.lle.GetLocality()}}
				byPrio[p] = ng
			}
			ng.lle.LbEndpoints = append(ng.lle.LbEndpoints, g.lle.LbEndpoints[i])
			ng.eps = append(ng.eps, ep)
		}
		keys := make([]int, 0, len(byPrio))
		for p := range byPrio {
			keys = append(keys, p)
		}
		sort.Ints(keys)
		for _, p := range keys {
			ng := byPrio[p]
			ng.lle.LoadBalancingWeight = wrapperspb.UInt32(sumWeights(ng.lle.LbEndpoints))
			out = append(out, ng)
			prio = append(prio, p)
		}
	}
	compact(out, prio)
	return out
}
