// Package listener is the proxy's listener manager: it binds listeners,
// accepts connections, hands redirected connections to the listener of
// their original destination (use_original_dst), matches filter chains and
// runs the chain's network filter.
package listener

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	originalsrcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tcpproxy"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
	"github.com/straitmesh/strait/internal/proxy/tracing"
	"github.com/straitmesh/strait/internal/proxy/xdsclient"
)

const (
	originalDstFilter = "envoy.filters.listener.original_dst"
	originalDstType   = "type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst"
	originalSrcFilter = "envoy.filters.listener.original_src"
	originalSrcType   = "type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc"
)

// passiveListenerFilters only inspect; we accept and skip them.
var passiveListenerFilters = map[string]bool{
	"envoy.filters.listener.http_inspector": true,
}

// Listener is one built listener. Immutable once built.
type Listener struct {
	Name           string
	Config         *listenerv3.Listener
	Addr           netip.AddrPort
	Bind           bool
	UseOriginalDst bool // hand connections to the listener of their original destination
	OriginalDst    bool // listener filter original_dst: destination = SO_ORIGINAL_DST
	Transparent    bool // transparent: the socket has IP_TRANSPARENT (TPROXY)
	// OriginalSrc is set by the listener filter original_src: upstream
	// connections made for this listener's connections leave from the
	// downstream peer's IP, marked with OriginalSrc.Mark when not 0.
	OriginalSrc *OriginalSrc
	// TLSInspector is set by the listener filter tls_inspector: the
	// connection's ClientHello is read for filter chain matching
	// (inspectTLS), under FiltersTimeout (0: none), after which the
	// connection closes unless ContinueOnTimeout.
	TLSInspector      bool
	FiltersTimeout    time.Duration
	ContinueOnTimeout bool
	chains            []*filterChain
	defaultChain      *filterChain
	stats             *stats.ListenerStats
	// version is the LDS version_info that carried this config (empty for
	// static listeners); set before the listener is published.
	version string
}

// OriginalSrc is a configured original_src listener filter.
type OriginalSrc struct {
	Mark uint32 // SO_MARK of upstream connections; 0: none
}

// buildOriginalSrc validates an original_src listener filter config. A
// filter without typed_config has the defaults (no mark).
func buildOriginalSrc(lf *listenerv3.ListenerFilter) (*OriginalSrc, error) {
	var cfg originalsrcv3.OriginalSrc
	if tc := lf.GetTypedConfig(); tc != nil {
		if tc.GetTypeUrl() != originalSrcType {
			return nil, fmt.Errorf("listener filter %q: typed_config is %q, want %q", lf.GetName(), tc.GetTypeUrl(), originalSrcType)
		}
		if err := tc.UnmarshalTo(&cfg); err != nil {
			return nil, fmt.Errorf("listener filter %q: typed_config: %w", lf.GetName(), err)
		}
	} else if lf.GetConfigType() != nil {
		return nil, fmt.Errorf("listener filter %q: only typed_config is supported", lf.GetName())
	}
	if err := fieldaudit.Check("original_src", cfg.ProtoReflect(), originalSrcHonoured, originalSrcRefused); err != nil {
		return nil, fmt.Errorf("listener filter %q: %w", lf.GetName(), err)
	}
	return &OriginalSrc{Mark: cfg.GetMark()}, nil
}

// Deps are what network filters need to be built.
type Deps struct {
	Routes hcm.Routes
	Stats  *stats.Store
	// Secrets serves the SDS secrets of TLS transport sockets (nil: a
	// chain naming one is refused).
	Secrets *tlsconf.Provider
	// AccessLogs are the proxy's access log files (nil: a filter with an
	// access_log is refused).
	AccessLogs *accesslog.Files
	// Local is the proxy's own workload for Istio's network filters
	// (istio.go); zero: such filters are refused.
	Local Local
	// Tracing are the proxy's span reporters (nil: an HCM with tracing
	// is refused).
	Tracing *tracing.Reporters
	// direction is the listener's traffic_direction, set by build.
	direction corev3.TrafficDirection
}

// StatsLabel is Envoy's envoy_listener_address label for an address.
func StatsLabel(a netip.AddrPort) string {
	return a.Addr().String() + "_" + strconv.Itoa(int(a.Port()))
}

// Build validates a listener and returns it. It rejects what it cannot
// honour so the update is NACKed rather than served wrongly.
func Build(l *listenerv3.Listener, d Deps) (*Listener, error) {
	out, err := build(l, d)
	if err != nil {
		return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
	}
	return out, nil
}

func build(l *listenerv3.Listener, d Deps) (*Listener, error) {
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil {
		return nil, fmt.Errorf("address: only socket_address is supported")
	}
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return nil, fmt.Errorf("address %q is not an IP", sa.GetAddress())
	}
	out := &Listener{
		Name:           l.GetName(),
		Config:         l,
		Addr:           netip.AddrPortFrom(ip.Unmap(), uint16(sa.GetPortValue())),
		Bind:           l.GetBindToPort() == nil || l.GetBindToPort().GetValue(),
		UseOriginalDst: l.GetUseOriginalDst().GetValue(),
		Transparent:    l.GetTransparent().GetValue(),
	}
	if err := checkListenerFields(l); err != nil {
		return nil, err
	}
	d.direction = l.GetTrafficDirection()
	if out.Bind && len(l.GetAdditionalAddresses()) > 0 {
		return nil, fmt.Errorf("additional_addresses are not supported")
	}
	for _, lf := range l.GetListenerFilters() {
		switch {
		case lf.GetName() == originalSrcFilter || lf.GetTypedConfig().GetTypeUrl() == originalSrcType:
			if out.OriginalSrc != nil {
				return nil, fmt.Errorf("listener filter %q appears more than once", originalSrcFilter)
			}
			osrc, err := buildOriginalSrc(lf)
			if err != nil {
				return nil, err
			}
			out.OriginalSrc = osrc
		case lf.GetName() == originalDstFilter || lf.GetTypedConfig().GetTypeUrl() == originalDstType:
			out.OriginalDst = true
		case lf.GetName() == tlsInspectorFilter || lf.GetTypedConfig().GetTypeUrl() == tlsInspectorType:
			if err := buildTLSInspector(lf); err != nil {
				return nil, err
			}
			out.TLSInspector = true
		case passiveListenerFilters[lf.GetName()]:
		default:
			return nil, fmt.Errorf("listener filter %q is not supported", lf.GetName())
		}
	}
	out.FiltersTimeout, out.ContinueOnTimeout = defaultListenerFiltersTimeout, l.GetContinueOnListenerFiltersTimeout()
	if t := l.GetListenerFiltersTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
			return nil, fmt.Errorf("listener_filters_timeout %v is not a valid duration", t)
		}
		out.FiltersTimeout = t.AsDuration()
	}
	for i, fc := range l.GetFilterChains() {
		if err := checkFilterChainFields(fmt.Sprintf("filter_chains[%d]", i), fc); err != nil {
			return nil, err
		}
		c, err := buildChain(fc, d)
		if err != nil {
			return nil, fmt.Errorf("filter_chains[%d] %q: %w", i, fc.GetName(), err)
		}
		if c != nil {
			out.chains = append(out.chains, c)
		}
	}
	if fc := l.GetDefaultFilterChain(); fc != nil {
		if err := checkFilterChainFields("default_filter_chain", fc); err != nil {
			return nil, err
		}
		c, err := buildChain(fc, d)
		if err != nil {
			return nil, fmt.Errorf("default_filter_chain: %w", err)
		}
		out.defaultChain = c
	}
	// A chain without a match matches at every level like any chain that
	// leaves a criterion out: it does not serve connections to a port that
	// other chains name (Envoy's filter chain matcher does not back
	// track). Only default_filter_chain serves what no chain matches.
	seenDefault := false
	for _, c := range out.chains {
		if c.isDefault {
			if seenDefault {
				return nil, fmt.Errorf("more than one filter chain without filter_chain_match")
			}
			seenDefault = true
		}
	}
	out.stats = d.Stats.Listener(StatsLabel(out.Addr))
	return out, nil
}

// buildFilters builds the network filters of a chain; exactly one terminal
// filter (tcp_proxy or http_connection_manager) must be last.
func buildFilters(fc *listenerv3.FilterChain, c *filterChain, d Deps) error {
	fs := fc.GetFilters()
	if len(fs) == 0 {
		return fmt.Errorf("no network filters")
	}
	for i, f := range fs {
		last := i == len(fs)-1
		tc := f.GetTypedConfig()
		if known, err := c.istio.add(f, d); known { // istio.go
			if err != nil {
				return fmt.Errorf("filter %q: %w", f.GetName(), err)
			}
			if last {
				return fmt.Errorf("filter %q must come before a terminal filter", f.GetName())
			}
			continue
		}
		switch {
		case f.GetName() == tcpproxy.Name || tc.GetTypeUrl() == "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy":
			if !last {
				return fmt.Errorf("filter %q must be the last filter", f.GetName())
			}
			var cfg tcpv3.TcpProxy
			if err := tc.UnmarshalTo(&cfg); err != nil {
				return fmt.Errorf("filter %q: typed_config: %w", f.GetName(), err)
			}
			t, err := tcpproxy.Build(&cfg)
			if err != nil {
				return fmt.Errorf("filter %q: %w", f.GetName(), err)
			}
			if t.AccessLog, err = accesslog.Build(cfg.GetAccessLog(), d.AccessLogs); err != nil {
				return fmt.Errorf("filter %q: %w", f.GetName(), err)
			}
			c.istio.apply(t, d) // istio.go
			c.tcp = t
		case f.GetName() == hcm.Name || tc.GetTypeUrl() == "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager":
			if !last {
				return fmt.Errorf("filter %q must be the last filter", f.GetName())
			}
			var cfg hcmv3.HttpConnectionManager
			if err := tc.UnmarshalTo(&cfg); err != nil {
				return fmt.Errorf("filter %q: typed_config: %w", f.GetName(), err)
			}
			h, err := hcm.Build(&cfg, d.Routes)
			if err != nil {
				return fmt.Errorf("filter %q: %w", f.GetName(), err)
			}
			if h.AccessLog, err = accesslog.Build(cfg.GetAccessLog(), d.AccessLogs); err != nil {
				return fmt.Errorf("filter %q: %w", f.GetName(), err)
			}
			h.UseNode(d.Local.Node, d.direction) // Istio's filters read them
			if err := h.UseTracing(d.Tracing); err != nil {
				return fmt.Errorf("filter %q: %w", f.GetName(), err)
			}
			h.UseStats(d.Stats)
			if c.istio.stats != nil {
				return fmt.Errorf("filter %q: the istio.stats network filter is for tcp_proxy chains (an HCM takes the HTTP filter)", f.GetName())
			}
			c.http = h
			if rds := cfg.GetRds(); rds != nil {
				if c.rdsFetchTimeout, err = xdsclient.InitialFetchTimeout(rds.GetConfigSource()); err != nil {
					return fmt.Errorf("filter %q: rds.config_source: %w", f.GetName(), err)
				}
			}
		case f.GetName() == rbac.NetworkName || tc.GetTypeUrl() == "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC":
			if last {
				return fmt.Errorf("filter %q must come before a terminal filter", f.GetName())
			}
			r, prefix, err := rbac.ParseNetwork(tc)
			if err != nil {
				return fmt.Errorf("filter %q: %w", f.GetName(), err)
			}
			r.UseStats(d.Stats, prefix)
			c.rbac = append(c.rbac, r)
		default:
			return fmt.Errorf("network filter %q is not supported", f.GetName())
		}
	}
	if c.tcp == nil && c.http == nil {
		return fmt.Errorf("no terminal filter (want %s or %s)", tcpproxy.Name, hcm.Name)
	}
	return nil
}
