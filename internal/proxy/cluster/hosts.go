package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster/lb"
)

// host is one upstream endpoint with the state that outlives an EDS update
// of its cluster: requests in flight (LEAST_REQUEST), outlier detection and
// active health checking. setEndpoints carries a host over to the next
// endpoint list when its address stays, as Envoy keeps its Host objects.
type host struct {
	// 112 bytes (a size class; the fields are ordered for size): a
	// sidecar's configuration of 1,000 services holds 10,000 hosts
	// (bench/sidecar); declaration order and a time.Time of its own made
	// it 136, allocated as 144.

	// Set at creation, read-only.
	ep hostEndpoint
	// created is when it joined the cluster (slow start), shared by the
	// hosts one update created.
	created *time.Time

	active atomic.Int64 // requests in flight (PickRequest to Finish)

	// od is made on the host's first outlier detection report
	// (outlier): most hosts of a sidecar's configuration belong to
	// clusters without outlier detection or never carry a request, and
	// the state would be a third of each host.
	od atomic.Pointer[hostOutlier]

	weight uint32      // load_balancing_weight, ≥ 1; set at creation, read-only
	hcs    healthState // owned by the cluster's health checker goroutine

	// ejected and hcFailed make the host unhealthy; the cluster's
	// unhealthy counter follows them (see setUnhealthy).
	ejected  atomic.Bool
	hcFailed atomic.Bool
}

// hostOutlier is a host's outlier detection state.
type hostOutlier struct {
	mu sync.Mutex // guards s
	s  outlierState
}

// outlier returns h's outlier detection state, making it on first use.
func (h *host) outlier() *hostOutlier {
	if o := h.od.Load(); o != nil {
		return o
	}
	if o := new(hostOutlier); h.od.CompareAndSwap(nil, o) {
		return o
	}
	return h.od.Load()
}

// healthy reports whether the load balancer may pick h outside panic mode.
func (h *host) healthy() bool { return !h.ejected.Load() && !h.hcFailed.Load() }

// The host as the load balancers see it (lb.Host; hostSet's
// lb.Balancer[*host] checks that *host is one).
func (h *host) Weight() uint32     { return h.weight }
func (h *host) Address() string    { return h.ep.Address }
func (h *host) Active() int64      { return h.active.Load() }
func (h *host) Created() time.Time { return *h.created }

// hostEndpoint is what a host keeps of its Endpoint: the fields an
// endpoint list sets (endpointsFrom), without the ones a request fills
// in (Source, Downstream, the pick's), which would take more than half of
// every host of every cluster.
type hostEndpoint struct {
	Network, Address              string
	transportMatch, localityMatch string
}

func hostEndpointOf(e Endpoint) hostEndpoint {
	return hostEndpoint{Network: e.Network, Address: e.Address, transportMatch: e.transportMatch, localityMatch: e.localityMatch}
}

// endpoint is the Endpoint a pick of the host starts from.
func (e hostEndpoint) endpoint() Endpoint {
	return Endpoint{Network: e.Network, Address: e.Address, transportMatch: e.transportMatch, localityMatch: e.localityMatch}
}

// hostSet is a cluster's endpoint list and what the load balancer built
// for it. Immutable once published.
type hostSet struct {
	hosts  []*host
	lb     lb.Balancer[*host]
	newest time.Time // the latest host's created
	// levels are the hosts by priority (index), when the assignment has
	// more than one priority, or localities that locality weighted load
	// balancing weighs; nil otherwise, and then lb picks among all hosts
	// (buildLevels).
	levels []*priorityLevel
	// overprovisioning is the overprovisioning factor, in percent.
	overprovisioning uint32
}

// newHostSet makes the host list for eps, reusing the hosts of prev that
// have the same address so that their state carries over.
func newHostSet(l endpointList, prev *hostSet, cfg lb.Config) *hostSet {
	eps, weights := l.eps, l.weights
	old := map[string]*host{}
	if prev != nil {
		for _, h := range prev.hosts {
			old[h.ep.Network+"|"+h.ep.Address] = h
		}
	}
	s := &hostSet{hosts: make([]*host, len(eps))}
	now := new(time.Time)
	*now = time.Now()
	for i, ep := range eps {
		w := uint32(1)
		if i < len(weights) && weights[i] > 0 {
			w = weights[i]
		}
		h := old[ep.Network+"|"+ep.Address]
		// A host whose weight or transport socket match metadata changed
		// is a new host: picks return h.ep, which the TLS decision reads.
		if h == nil || h.weight != w || h.ep.transportMatch != ep.transportMatch || h.ep.localityMatch != ep.localityMatch {
			h = &host{ep: hostEndpointOf(ep), weight: w, created: now}
		}
		s.hosts[i] = h
		if h.created.After(s.newest) {
			s.newest = *h.created
		}
	}
	s.lb = lb.New(cfg, s.hosts)
	s.overprovisioning = max(l.overprovisioning, 1)
	s.levels = buildLevels(s.hosts, l, cfg)
	return s
}
