package configdump

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/straitmesh/strait/internal/proxy/listener"
)

// Kinds of resource whose apply times appliedTimes keeps.
const (
	kindCluster = iota
	kindListener
	kindRoute
)

// appliedTimes remembers when the proxy applied each config of each
// resource (a static one: at start-up), for the dump's last_updated, as
// Envoy stamps a resource when it adds or changes it: a resource sent
// again unchanged keeps its time. A resource may show a few configs at
// once (a listener's active, warming and draining versions); after each
// apply, the configs of that kind no longer shown are forgotten. A config
// is known by its configSum, not kept: holding the messages would keep
// every decoded Cluster alive after the cluster manager dropped it
// (cluster/configwire.go).
type appliedTimes struct {
	mu    sync.Mutex // guards names
	names map[appliedKey][]appliedConfig
}

type appliedKey struct {
	kind int
	name string
}

type appliedConfig struct {
	sum configSum
	at  time.Time
}

// configSum identifies a config: the SHA-256 of its deterministic wire
// form, so that equal configs (proto.Equal) have equal sums.
type configSum [sha256.Size]byte

// sumOf is m's configSum.
func sumOf(m proto.Message) configSum {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err) // only fails for invalid UTF-8, which decoding refused
	}
	return sha256.Sum256(b)
}

// record notes that the config whose sum is sum was applied as the
// resource name at now, unless the resource already has that config.
func (a *appliedTimes) record(kind int, name string, sum configSum, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := appliedKey{kind, name}
	for _, e := range a.names[k] {
		if e.sum == sum {
			return
		}
	}
	if a.names == nil {
		a.names = map[appliedKey][]appliedConfig{}
	}
	a.names[k] = append(a.names[k], appliedConfig{sum: sum, at: now})
}

// keep forgets the configs of kind that live does not list under their
// name.
func (a *appliedTimes) keep(kind int, live map[string][]configSum) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, list := range a.names {
		if k.kind != kind {
			continue
		}
		list = slices.DeleteFunc(list, func(e appliedConfig) bool { return !slices.Contains(live[k.name], e.sum) })
		if len(list) == 0 {
			delete(a.names, k)
		} else {
			a.names[k] = list
		}
	}
}

// lookup returns when config was applied as the resource name (nil if
// never: the dump then leaves last_updated out).
func (a *appliedTimes) lookup(kind int, name string, config proto.Message) *timestamppb.Timestamp {
	sum := sumOf(config)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.names[appliedKey{kind, name}] {
		if e.sum == sum {
			return timestamppb.New(e.at)
		}
	}
	return nil
}

// AppliedClusters records the clusters an update (or the bootstrap)
// applied and forgets the configs no longer shown.
func (d *Dumper) AppliedClusters(cs []*clusterv3.Cluster) {
	now := time.Now()
	for _, c := range cs {
		d.applied.record(kindCluster, c.GetName(), sumOf(c), now)
	}
	live := map[string][]configSum{}
	d.src.Clusters.EachConfig(func(name string, wire []byte) {
		live[name] = append(live[name], sha256.Sum256(wire))
	})
	d.applied.keep(kindCluster, live)
}

// AppliedListeners is AppliedClusters for listeners (static, and LDS ones
// active, warming or draining).
func (d *Dumper) AppliedListeners(ls []*listenerv3.Listener) {
	now := time.Now()
	for _, l := range ls {
		d.applied.record(kindListener, l.GetName(), sumOf(l), now)
	}
	_, static, _ := d.src.Listeners.Snapshot()
	live := map[string][]configSum{}
	for _, l := range static {
		live[l.GetName()] = append(live[l.GetName()], sumOf(l))
	}
	for _, dyn := range d.src.Listeners.Dynamic() {
		for _, st := range []*listener.ListenerState{dyn.Active, dyn.Warming, dyn.Draining} {
			if st != nil {
				live[dyn.Name] = append(live[dyn.Name], sumOf(st.Config))
			}
		}
	}
	d.applied.keep(kindListener, live)
}

// AppliedRoutes is AppliedClusters for route configurations.
func (d *Dumper) AppliedRoutes(rcs []*routev3.RouteConfiguration) {
	now := time.Now()
	for _, rc := range rcs {
		d.applied.record(kindRoute, rc.GetName(), sumOf(rc), now)
	}
	live := map[string][]configSum{}
	d.src.Routes.EachConfig(func(name string, wire []byte) {
		live[name] = append(live[name], sha256.Sum256(wire))
	})
	d.applied.keep(kindRoute, live)
}
