package lb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// SlowStart is a ROUND_ROBIN or LEAST_REQUEST cluster's slow_start_config:
// a host that joined less than window ago gets a part of its weight,
// weight × max(minWeight, timeFactor^(1/aggression)) with timeFactor =
// max(seconds since it joined, 1) / window seconds (Envoy's slow start
// mode). The runtime key of aggression is not read: strait has no runtime.
type SlowStart struct {
	window     time.Duration
	aggression float64
	minWeight  float64 // fraction
}

func parseSlowStart(field string, ss *clusterv3.Cluster_SlowStartConfig) (*SlowStart, error) {
	if ss == nil {
		return nil, nil
	}
	if err := fieldaudit.Only(field, ss.ProtoReflect(), slowStartFields); err != nil {
		return nil, err
	}
	w := ss.GetSlowStartWindow()
	if w == nil || w.AsDuration() <= 0 {
		return nil, fmt.Errorf("%s.slow_start_window must be a positive duration", field)
	}
	s := &SlowStart{window: w.AsDuration(), aggression: 1, minWeight: 0.1}
	if a := ss.GetAggression(); a != nil {
		if a.GetDefaultValue() <= 0 {
			return nil, fmt.Errorf("%s.aggression %v must be above 0", field, a.GetDefaultValue())
		}
		s.aggression = a.GetDefaultValue()
	}
	if p := ss.GetMinWeightPercent(); p != nil {
		if p.GetValue() < 0 || p.GetValue() > 100 {
			return nil, fmt.Errorf("%s.min_weight_percent %v is not a percentage", field, p.GetValue())
		}
		s.minWeight = p.GetValue() / 100
	}
	return s, nil
}

// Window is how long a host that joined gets less than its weight.
func (s *SlowStart) Window() time.Duration { return s.window }

// factor is the part of its weight a host that joined at created has at
// now: 1 once out of the window.
func (s *SlowStart) factor(created, now time.Time) float64 {
	age := now.Sub(created)
	if age >= s.window {
		return 1
	}
	tf := max(age.Seconds(), 1) / s.window.Seconds()
	return max(s.minWeight, math.Pow(tf, 1/s.aggression))
}

// PickSlow chooses among hosts (those ok accepts) with the slow-start
// weights of lb.Slow, which must not be nil: at random in proportion for
// ROUND_ROBIN, by the fewest active requests per effective weight among
// choices for LEAST_REQUEST. It returns the zero H when ok accepts none.
func PickSlow[H Host](lb Config, hosts []H, now time.Time, ok func(H) bool) H {
	var none H
	s := lb.Slow
	hosts = filter(hosts, ok)
	if len(hosts) == 0 {
		return none
	}
	w := func(h H) float64 { return float64(h.Weight()) * s.factor(h.Created(), now) }
	if lb.Policy == clusterv3.Cluster_LEAST_REQUEST {
		var best H
		var bestLoad float64
		for range max(lb.choiceCount, 1) {
			h := hosts[rand.IntN(len(hosts))]
			load := float64(h.Active()+1) / w(h)
			if best == none || load < bestLoad {
				best, bestLoad = h, load
			}
		}
		return best
	}
	var total float64
	for _, h := range hosts {
		total += w(h)
	}
	x := rand.Float64() * total
	for _, h := range hosts {
		x -= w(h)
		if x < 0 {
			return h
		}
	}
	return hosts[len(hosts)-1]
}
