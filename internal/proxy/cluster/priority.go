package cluster

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster/lb"
)

// defaultOverprovisioning is Envoy's default overprovisioning factor
// (ClusterLoadAssignment.Policy.overprovisioning_factor), in percent: a
// priority or locality with 1/1.4 of its hosts healthy still takes its
// full share.
const defaultOverprovisioning = 140

// priorityLevel is the hosts of one priority. Immutable but for the
// locality scheduler's state.
type priorityLevel struct {
	hosts []*host
	lb    lb.Balancer[*host] // among hosts
	// localities are the level's LocalityLbEndpoints with a weight, when
	// the cluster has locality_weighted_lb_config; nil otherwise.
	localities []*localityHosts

	mu      sync.Mutex // guards current
	current []float64  // smooth weighted round robin state, by locality
}

// localityHosts is one locality of a priority level.
type localityHosts struct {
	hosts  []*host
	lb     lb.Balancer[*host]
	weight uint32
}

// buildLevels groups hosts by priority, and within a priority by locality
// when locality weighted load balancing is on; nil when the hosts form a
// single group (one priority, and one locality or no locality weights).
func buildLevels(hosts []*host, l endpointList, cfg lb.Config) []*priorityLevel {
	if l.group == nil {
		return nil
	}
	var top uint32
	for _, g := range l.groups {
		top = max(top, g.priority)
	}
	byGroup := make([][]*host, len(l.groups))
	for i, h := range hosts {
		byGroup[l.group[i]] = append(byGroup[l.group[i]], h)
	}
	levels := make([]*priorityLevel, top+1)
	for p := range levels {
		levels[p] = &priorityLevel{}
	}
	for gi, g := range l.groups {
		lv := levels[g.priority]
		lv.hosts = append(lv.hosts, byGroup[gi]...)
		if cfg.LocalityWeighted && g.weight > 0 && len(byGroup[gi]) > 0 {
			lv.localities = append(lv.localities, &localityHosts{hosts: byGroup[gi], lb: lb.New(cfg, byGroup[gi]), weight: g.weight})
		}
	}
	single := len(levels) == 1
	for _, lv := range levels {
		lv.lb = lb.New(cfg, lv.hosts)
		lv.current = make([]float64, len(lv.localities))
		if len(lv.localities) > 1 {
			single = false
		}
	}
	if single && !cfg.LocalityWeighted {
		return nil
	}
	return levels
}

// levelHealth is how many of a group's hosts are healthy.
type levelHealth struct{ healthy, total int }

// availability is the share (0..1) of its load a group can take: its
// healthy fraction times the overprovisioning factor, at most 1.
func (lh levelHealth) availability(overprovisioning uint32) float64 {
	if lh.total == 0 {
		return 0
	}
	return min(1, float64(lh.healthy)*float64(overprovisioning)/100/float64(lh.total))
}

// pickLevels is Envoy's priority load balancing
// (LoadBalancerBase::recalculatePerPriorityState): each priority takes
// load in proportion to its availability, at most what the priorities
// before it leave, scaled up when their sum is below 100 %; the request
// then goes to a host of the priority it draws, in the locality it draws
// when localities are weighted (chooseHealthyLocality). With no healthy
// host anywhere, every host serves in panic (none with panic mode off); a
// drawn priority with fewer healthy hosts than healthy_panic_threshold
// serves from all its hosts.
//
// Levels in excluded take no load (a retry's previous_priorities), unless
// no other level has a healthy host: then the exclusion is ignored, as
// Envoy falls back to the unmodified load. It returns the host and its
// level.
func (c *Cluster) pickLevels(s *hostSet, hash uint64, hasHash bool, excluded []uint32) (*host, uint32) {
	now := time.Now()
	check := c.outlier != nil || c.hc != nil
	health := func(hosts []*host) levelHealth {
		lh := levelHealth{healthy: len(hosts), total: len(hosts)}
		if check {
			lh.healthy = 0
			for _, h := range hosts {
				c.returnIfExpired(h, now)
				if h.healthy() {
					lh.healthy++
				}
			}
		}
		return lh
	}
	levels := s.levels
	healths := make([]levelHealth, len(levels))
	avail := make([]float64, len(levels))
	var sum, kept float64
	for i, lv := range levels {
		healths[i] = health(lv.hosts)
		avail[i] = healths[i].availability(s.overprovisioning)
		sum += avail[i]
		if !slices.Contains(excluded, uint32(i)) {
			kept += avail[i]
		}
	}
	if len(excluded) > 0 && kept > 0 {
		for _, p := range excluded {
			if int(p) < len(avail) {
				avail[p] = 0
			}
		}
		sum = kept
	}
	if sum == 0 {
		// No healthy host in any priority. With panic mode off, none may
		// serve (Envoy's recalculatePerPriorityPanic); else every host
		// may, the load by host count (recalculateLoadInTotalPanic).
		if c.panicThreshold == 0 {
			return nil, 0
		}
		c.Stats.Counter("lb_healthy_panic").Add(1)
		h := s.lb.Pick(hash, hasHash, nil)
		return h, s.levelOf(h)
	}
	total := min(1, sum)
	var draw float64
	if hasHash {
		draw = float64(hash%10000) / 10000
	} else {
		draw = rand.Float64()
	}
	chosen := -1
	remaining, acc := 1.0, 0.0
	for i := range levels {
		load := min(remaining, avail[i]/total)
		remaining -= load
		acc += load
		if draw < acc && load > 0 {
			chosen = i
			break
		}
	}
	if chosen < 0 { // rounding: the last priority with load
		for i := len(levels) - 1; i >= 0; i-- {
			if avail[i] > 0 {
				chosen = i
				break
			}
		}
	}
	lh := healths[chosen]
	panic := float64(lh.healthy)*100 < c.panicThreshold*float64(lh.total)
	if panic {
		c.Stats.Counter("lb_healthy_panic").Add(1)
	}
	ok := (*host).healthy
	if panic || !check {
		ok = nil
	}
	lv := levels[chosen]
	group, bal := lv.hosts, lv.lb
	if len(lv.localities) > 0 {
		if l := lv.chooseLocality(health, s.overprovisioning, panic); l != nil {
			group, bal = l.hosts, l.lb
		}
	}
	if ss := c.lb.Slow; ss != nil && now.Sub(s.newest) < ss.Window() {
		if h := lb.PickSlow(c.lb, group, now, ok); h != nil {
			return h, uint32(chosen)
		}
	} else if h := bal.Pick(hash, hasHash, ok); h != nil {
		return h, uint32(chosen)
	}
	return lv.lb.Pick(hash, hasHash, ok), uint32(chosen)
}

// levelOf is the priority level of h (0 when not found).
func (s *hostSet) levelOf(h *host) uint32 {
	for i, lv := range s.levels {
		if slices.Contains(lv.hosts, h) {
			return uint32(i)
		}
	}
	return 0
}

// chooseLocality draws a locality of the level by smooth weighted round
// robin over its effective weights, weight × availability (Envoy's
// locality weighted load balancing); nil when none is available.
func (lv *priorityLevel) chooseLocality(health func([]*host) levelHealth, overprovisioning uint32, panic bool) *localityHosts {
	eff := make([]float64, len(lv.localities))
	var total float64
	for i, l := range lv.localities {
		a := 1.0
		if !panic {
			a = health(l.hosts).availability(overprovisioning)
		}
		eff[i] = float64(l.weight) * a
		total += eff[i]
	}
	if total == 0 {
		return nil
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	best := -1
	for i := range eff {
		if eff[i] == 0 {
			continue
		}
		lv.current[i] += eff[i]
		if best < 0 || lv.current[i] > lv.current[best] {
			best = i
		}
	}
	lv.current[best] -= total
	return lv.localities[best]
}
