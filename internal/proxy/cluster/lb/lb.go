// Package lb holds the cluster's load balancing policies, as Envoy has
// them (lb_policy and its lb_config): ROUND_ROBIN (weighted), RANDOM,
// LEAST_REQUEST (power of choices, or weighted by requests in flight),
// RING_HASH and MAGLEV, with slow start for ROUND_ROBIN and LEAST_REQUEST.
// Parse reads and audits a Cluster's policy fields; New builds a Balancer
// over a list of hosts. The balancers are generic over the host type
// (Host) so that the cluster's host, with its health state, is what they
// return: package cluster owns the hosts, their health and the priority
// levels, and this package only chooses among the hosts it is given.
package lb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Host is what a balancer reads of a host. Implementations are pointers
// (the zero value, nil, is "no host"); their methods are safe for
// concurrent use.
type Host interface {
	comparable
	// Weight is the host's load_balancing_weight, at least 1.
	Weight() uint32
	// Address places the host on the hash ring and in Maglev's table.
	Address() string
	// Active is the number of requests in flight to the host
	// (LEAST_REQUEST).
	Active() int64
	// Created is when the host joined its cluster (slow start).
	Created() time.Time
}

// Envoy's load balancer defaults and limits (cluster.proto).
const (
	defaultMinRingSize    = 1024
	defaultMaxRingSize    = 8 * 1024 * 1024
	defaultMaglevSize     = 65537
	maxMaglevSize         = 5000011
	defaultChoiceCount    = 2
	maxWeightedRRSchedule = 1 << 16
)

// Config is a cluster's load balancing policy, read once from its config.
type Config struct {
	Policy      clusterv3.Cluster_LbPolicy
	minRing     uint64
	maxRing     uint64
	maglevSize  uint64
	choiceCount uint32
	Slow        *SlowStart // ROUND_ROBIN and LEAST_REQUEST; nil: none
	// LocalityWeighted is common_lb_config.locality_weighted_lb_config:
	// localities take load by their weights (the cluster's pickLevels).
	LocalityWeighted bool
}

// Parse reads lb_policy and its lb_config. A policy or option strait
// doesn't implement is an error naming it.
func Parse(c *clusterv3.Cluster) (Config, error) {
	lb := Config{Policy: c.GetLbPolicy(), minRing: defaultMinRingSize, maxRing: defaultMaxRingSize,
		maglevSize: defaultMaglevSize, choiceCount: defaultChoiceCount}
	switch lb.Policy {
	case clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_LEAST_REQUEST, clusterv3.Cluster_RANDOM,
		clusterv3.Cluster_RING_HASH, clusterv3.Cluster_MAGLEV, clusterv3.Cluster_CLUSTER_PROVIDED:
	default:
		return lb, fmt.Errorf("lb_policy %s is not supported (want ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV or CLUSTER_PROVIDED)", lb.Policy)
	}
	mismatch := func(field string) error {
		return fmt.Errorf("%s does not apply to lb_policy %s", field, lb.Policy)
	}
	switch cfg := c.GetLbConfig().(type) {
	case nil:
	case *clusterv3.Cluster_RingHashLbConfig_:
		if lb.Policy != clusterv3.Cluster_RING_HASH {
			return lb, mismatch("ring_hash_lb_config")
		}
		r := cfg.RingHashLbConfig
		if err := fieldaudit.Only("ring_hash_lb_config", r.ProtoReflect(), ringHashFields); err != nil {
			return lb, err
		}
		if r.GetHashFunction() != clusterv3.Cluster_RingHashLbConfig_XX_HASH {
			return lb, fmt.Errorf("ring_hash_lb_config.hash_function %s is not supported (only XX_HASH)", r.GetHashFunction())
		}
		if v := r.GetMinimumRingSize(); v != nil {
			lb.minRing = v.GetValue()
		}
		if v := r.GetMaximumRingSize(); v != nil {
			lb.maxRing = v.GetValue()
		}
		if lb.minRing > lb.maxRing {
			return lb, fmt.Errorf("ring_hash_lb_config: minimum_ring_size %d is above maximum_ring_size %d", lb.minRing, lb.maxRing)
		}
	case *clusterv3.Cluster_MaglevLbConfig_:
		if lb.Policy != clusterv3.Cluster_MAGLEV {
			return lb, mismatch("maglev_lb_config")
		}
		if v := cfg.MaglevLbConfig.GetTableSize(); v != nil {
			lb.maglevSize = v.GetValue()
		}
		if !isPrime(lb.maglevSize) || lb.maglevSize >= maxMaglevSize {
			return lb, fmt.Errorf("maglev_lb_config.table_size %d must be a prime below %d", lb.maglevSize, maxMaglevSize)
		}
	case *clusterv3.Cluster_LeastRequestLbConfig_:
		if lb.Policy != clusterv3.Cluster_LEAST_REQUEST {
			return lb, mismatch("least_request_lb_config")
		}
		if err := fieldaudit.Only("least_request_lb_config", cfg.LeastRequestLbConfig.ProtoReflect(), leastRequestFields); err != nil {
			return lb, err
		}
		if v := cfg.LeastRequestLbConfig.GetChoiceCount(); v != nil {
			lb.choiceCount = v.GetValue()
		}
		var err error
		if lb.Slow, err = parseSlowStart("least_request_lb_config.slow_start_config", cfg.LeastRequestLbConfig.GetSlowStartConfig()); err != nil {
			return lb, err
		}
	case *clusterv3.Cluster_RoundRobinLbConfig_:
		if lb.Policy != clusterv3.Cluster_ROUND_ROBIN {
			return lb, mismatch("round_robin_lb_config")
		}
		if err := fieldaudit.Only("round_robin_lb_config", cfg.RoundRobinLbConfig.ProtoReflect(), roundRobinFields); err != nil {
			return lb, err
		}
		var err error
		if lb.Slow, err = parseSlowStart("round_robin_lb_config.slow_start_config", cfg.RoundRobinLbConfig.GetSlowStartConfig()); err != nil {
			return lb, err
		}
	case *clusterv3.Cluster_OriginalDstLbConfig_:
		// Its fields are checked with the ORIGINAL_DST type (checkOriginalDst).
		if lb.Policy != clusterv3.Cluster_CLUSTER_PROVIDED {
			return lb, mismatch("original_dst_lb_config")
		}
	default:
		return lb, fmt.Errorf("lb_config %T is not supported", cfg)
	}
	return lb, nil
}

func isPrime(n uint64) bool {
	if n < 2 {
		return false
	}
	for d := uint64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// Balancer picks a host among the hosts it was built for. ok, when not
// nil, says which hosts may be picked (the healthy ones); Pick returns the
// zero H (nil) when none may. hash is the request's hash when hasHash
// (RING_HASH and MAGLEV; the other policies ignore it). Implementations
// are safe for concurrent use.
type Balancer[H Host] interface {
	Pick(hash uint64, hasHash bool, ok func(H) bool) H
}

// New builds lb's balancer over hosts (its slow start is not part of it:
// see PickSlow).
func New[H Host](lb Config, hosts []H) Balancer[H] {
	if len(hosts) == 0 {
		return emptyBalancer[H]{}
	}
	switch lb.Policy {
	case clusterv3.Cluster_LEAST_REQUEST:
		l := &leastRequest[H]{hosts: hosts, choices: max(lb.choiceCount, 1)}
		if !uniform(hosts) {
			l.current = make([]float64, len(hosts))
		}
		return l
	case clusterv3.Cluster_RANDOM:
		return newRandomLB(hosts)
	case clusterv3.Cluster_RING_HASH:
		return newRing(hosts, lb.minRing, lb.maxRing)
	case clusterv3.Cluster_MAGLEV:
		return newMaglev(hosts, lb.maglevSize)
	default:
		return newRoundRobin(hosts)
	}
}

type emptyBalancer[H Host] struct{}

func (emptyBalancer[H]) Pick(uint64, bool, func(H) bool) H {
	var none H
	return none
}

// filter returns the hosts ok accepts (a new slice), or hosts when ok is nil.
func filter[H Host](hosts []H, ok func(H) bool) []H {
	if ok == nil {
		return hosts
	}
	var out []H
	for _, h := range hosts {
		if ok(h) {
			out = append(out, h)
		}
	}
	return out
}

func uniform[H Host](hosts []H) bool {
	for _, h := range hosts[1:] {
		if h.Weight() != hosts[0].Weight() {
			return false
		}
	}
	return true
}

// roundRobin cycles through a schedule of the hosts: each host once when
// the weights are equal, else a smooth weighted order in which each host
// appears as often as its weight (nginx's smooth weighted round robin, a
// fixed-cost stand-in for Envoy's earliest-deadline-first scheduler).
type roundRobin[H Host] struct {
	schedule []H
	next     atomic.Uint64
}

func newRoundRobin[H Host](hosts []H) *roundRobin[H] {
	if uniform(hosts) {
		return &roundRobin[H]{schedule: hosts}
	}
	var total uint64
	for _, h := range hosts {
		total += uint64(h.Weight())
	}
	if total > maxWeightedRRSchedule {
		// Scale the weights down so that the schedule stays small; every
		// host keeps at least one slot.
		scaled := make([]uint64, len(hosts))
		var sum uint64
		for i, h := range hosts {
			scaled[i] = max(uint64(h.Weight())*maxWeightedRRSchedule/total, 1)
			sum += scaled[i]
		}
		return &roundRobin[H]{schedule: smoothSchedule(hosts, scaled, sum)}
	}
	w := make([]uint64, len(hosts))
	for i, h := range hosts {
		w[i] = uint64(h.Weight())
	}
	return &roundRobin[H]{schedule: smoothSchedule(hosts, w, total)}
}

func smoothSchedule[H Host](hosts []H, w []uint64, total uint64) []H {
	cur := make([]int64, len(hosts))
	out := make([]H, 0, total)
	for range total {
		best := 0
		for i := range hosts {
			cur[i] += int64(w[i])
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= int64(total)
		out = append(out, hosts[best])
	}
	return out
}

func (r *roundRobin[H]) Pick(_ uint64, _ bool, ok func(H) bool) H {
	var none H
	n := r.next.Add(1) - 1
	l := uint64(len(r.schedule))
	for i := range l {
		h := r.schedule[(n+i)%l]
		if ok == nil || ok(h) {
			if i > 0 {
				r.next.Add(i)
			}
			return h
		}
	}
	return none
}

// randomLB picks a host at random, in proportion to the weights.
type randomLB[H Host] struct {
	hosts []H
	cum   []uint64 // cumulative weights; nil when uniform
}

func newRandomLB[H Host](hosts []H) *randomLB[H] {
	r := &randomLB[H]{hosts: hosts}
	if !uniform(hosts) {
		var sum uint64
		for _, h := range hosts {
			sum += uint64(h.Weight())
			r.cum = append(r.cum, sum)
		}
	}
	return r
}

func (r *randomLB[H]) Pick(_ uint64, _ bool, ok func(H) bool) H {
	var none H
	if ok != nil {
		hs := filter(r.hosts, ok)
		if len(hs) == 0 {
			return none
		}
		return newRandomLB(hs).Pick(0, false, nil)
	}
	if r.cum == nil {
		return r.hosts[rand.IntN(len(r.hosts))]
	}
	x := rand.Uint64N(r.cum[len(r.cum)-1])
	i, _ := slices.BinarySearch(r.cum, x+1)
	return r.hosts[i]
}

// leastRequest is Envoy's LEAST_REQUEST: with equal weights,
// choice_count hosts drawn at random (power of two choices by default), the
// one with the fewest requests in flight wins; with unequal weights, a
// weighted round robin whose weights are weight / (requests in flight + 1)
// (Envoy's earliest-deadline-first schedule with active_request_bias 1),
// so that idle hosts share requests by their weights.
type leastRequest[H Host] struct {
	hosts   []H
	choices uint32

	mu      sync.Mutex // guards current
	current []float64  // weighted: smooth round robin state by host; nil when uniform
}

func (l *leastRequest[H]) Pick(_ uint64, _ bool, ok func(H) bool) H {
	var none H
	if l.current != nil {
		return l.pickWeighted(ok)
	}
	hosts := filter(l.hosts, ok)
	if len(hosts) == 0 {
		return none
	}
	var best H
	for range l.choices {
		h := hosts[rand.IntN(len(hosts))]
		if best == none || less(h, best) {
			best = h
		}
	}
	return best
}

func (l *leastRequest[H]) pickWeighted(ok func(H) bool) H {
	var none H
	l.mu.Lock()
	defer l.mu.Unlock()
	best := -1
	var total float64
	for i, h := range l.hosts {
		if ok != nil && !ok(h) {
			continue
		}
		w := float64(h.Weight()) / float64(h.Active()+1)
		total += w
		l.current[i] += w
		if best < 0 || l.current[i] > l.current[best] {
			best = i
		}
	}
	if best < 0 {
		return none
	}
	l.current[best] -= total
	return l.hosts[best]
}

// less reports whether a has less load than b: active/weight, compared
// without division.
func less[H Host](a, b H) bool {
	return (a.Active()+1)*int64(b.Weight()) < (b.Active()+1)*int64(a.Weight())
}

// ring is Envoy's RING_HASH (Karger's consistent hashing, ketama style):
// each host owns points on a 64-bit ring, xxHash64 of "ADDRESS_N"; a
// request goes to the first point at or after its hash. A request without
// a hash gets a random one.
type ring[H Host] struct {
	points []ringPoint[H]
}

type ringPoint[H Host] struct {
	hash uint64
	h    H
}

func newRing[H Host](hosts []H, minSize, maxSize uint64) *ring[H] {
	var total uint64
	for _, h := range hosts {
		total += uint64(h.Weight())
	}
	// As Envoy's RingHashLoadBalancer: scale so that the least weighted
	// host gets at least one point and the ring is at least minSize.
	minW := hosts[0].Weight()
	for _, h := range hosts {
		minW = min(minW, h.Weight())
	}
	scale := min(float64(maxSize), max(float64(minSize), float64(total)/float64(minW))) / float64(total)
	r := &ring[H]{}
	var target, current float64
	for _, h := range hosts {
		target += scale * float64(h.Weight())
		key := h.Address() + "_"
		for i := 0; current < target; i++ {
			r.points = append(r.points, ringPoint[H]{hash: xxhash.Sum64String(key + strconv.Itoa(i)), h: h})
			current++
		}
	}
	slices.SortFunc(r.points, func(a, b ringPoint[H]) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	return r
}

func (r *ring[H]) Pick(hash uint64, hasHash bool, ok func(H) bool) H {
	var none H
	if !hasHash {
		hash = rand.Uint64()
	}
	i, _ := slices.BinarySearchFunc(r.points, hash, func(p ringPoint[H], h uint64) int {
		switch {
		case p.hash < h:
			return -1
		case p.hash > h:
			return 1
		}
		return 0
	})
	n := len(r.points)
	for k := range n {
		p := r.points[(i+k)%n]
		if ok == nil || ok(p.h) {
			return p.h
		}
	}
	return none
}

// maglev is Envoy's MAGLEV: a lookup table of a prime size where each host
// fills slots in the order of its own permutation (offset and skip from
// xxHash64 of its address), in proportion to its weight.
type maglev[H Host] struct {
	table []H
}

func newMaglev[H Host](hosts []H, size uint64) *maglev[H] {
	type perm struct {
		offset, skip, next uint64
		target, filled     float64
	}
	var maxW uint32
	for _, h := range hosts {
		maxW = max(maxW, h.Weight())
	}
	ps := make([]perm, len(hosts))
	for i, h := range hosts {
		ps[i] = perm{
			offset: xxhash.Sum64String(h.Address()) % size,
			skip:   xxhash.Sum64String(h.Address()+"#skip")%(size-1) + 1,
			target: float64(h.Weight()) / float64(maxW),
		}
	}
	table := make([]H, size)
	var none H
	var filled uint64
	for iter := 1.0; filled < size; iter++ {
		for i := range hosts {
			p := &ps[i]
			if p.filled >= p.target*iter {
				continue // weighted: a lighter host takes a turn less often
			}
			for {
				slot := (p.offset + p.skip*p.next) % size
				p.next++
				if table[slot] == none {
					table[slot] = hosts[i]
					p.filled++
					filled++
					break
				}
			}
			if filled == size {
				break
			}
		}
	}
	return &maglev[H]{table: table}
}

func (m *maglev[H]) Pick(hash uint64, hasHash bool, ok func(H) bool) H {
	var none H
	if !hasHash {
		hash = rand.Uint64()
	}
	n := uint64(len(m.table))
	for k := range n {
		h := m.table[(hash+k)%n]
		if ok == nil || ok(h) {
			return h
		}
	}
	return none
}
