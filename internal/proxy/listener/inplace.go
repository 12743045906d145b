package listener

import (
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
)

// In-place filter chain update, as Envoy's listener manager does it
// (source/common/listener_manager/listener_impl.cc,
// ListenerImpl::supportUpdateFilterChain and diffFilterChain;
// ListenerManagerImpl::inPlaceFilterChainUpdate): when an LDS update of a
// listener changes nothing but its filter chains (filter_chains,
// default_filter_chain), the new version keeps the socket and the filter
// chains whose config is unchanged, with the connections they serve; only
// the chains the update removed or changed drain. Any other change
// replaces the listener version and drains all of its connections.
//
// Envoy compares the rest of the listener with repeated fields as sets;
// this compares them in order, so a reordered list (listener_filters,
// socket_options) replaces the whole listener: more draining, never less.

// allChains returns l's filter chains and its default chain, if any.
func (l *Listener) allChains() []*filterChain {
	out := append([]*filterChain(nil), l.chains...)
	if l.defaultChain != nil {
		out = append(out, l.defaultChain)
	}
	return out
}

// startDrain drains every connection of l, on all of its chains.
func (l *Listener) startDrain() {
	for _, c := range l.allChains() {
		c.drain.Start()
	}
}

// inPlaceUpdate reports whether next, a new version of the listener old,
// can take old's place keeping its unchanged filter chains: next has at
// least one filter chain (Envoy refuses in-place updates to none) and
// differs from old only in its filter chains.
func inPlaceUpdate(old, next *Listener) bool {
	if len(next.Config.GetFilterChains()) == 0 {
		return false
	}
	return filterChainOnlyChange(old.Config, next.Config)
}

// filterChainOnlyChange reports whether a and b are equal but for their
// filter chains (Envoy's ListenerMessageUtil::filterChainOnlyChange).
func filterChainOnlyChange(a, b *listenerv3.Listener) bool {
	strip := func(l *listenerv3.Listener) *listenerv3.Listener {
		c := proto.Clone(l).(*listenerv3.Listener)
		c.FilterChains, c.DefaultFilterChain, c.FilterChainMatcher = nil, nil, nil
		return c
	}
	return proto.Equal(strip(a), strip(b))
}

// adoptChains makes next, an in-place update of old that is not yet
// published, serve with old's chains wherever its chain config is the same
// (the same objects, so connections on them carry on undisturbed), and
// returns old's chains next does not keep: they drain. The default chain
// is only ever kept as the default chain.
func adoptChains(old, next *Listener) (dropped []*filterChain) {
	kept := map[*filterChain]bool{}
	for i, c := range next.chains {
		for _, oc := range old.chains {
			if !kept[oc] && proto.Equal(oc.config, c.config) {
				next.chains[i] = oc
				kept[oc] = true
				break
			}
		}
	}
	if oc := old.defaultChain; oc != nil && next.defaultChain != nil && proto.Equal(oc.config, next.defaultChain.config) {
		next.defaultChain = oc
		kept[oc] = true
	}
	for _, oc := range old.allChains() {
		if !kept[oc] {
			dropped = append(dropped, oc)
		}
	}
	return dropped
}
