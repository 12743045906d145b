package cluster

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// HTTPProtocolOptionsKey is the typed_extension_protocol_options key of the
// upstream HTTP options (Envoy's envoy.upstreams.http.http_protocol_options).
const HTTPProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// UpstreamProtocol is the HTTP version a cluster speaks to its endpoints.
type UpstreamProtocol int

const (
	// UpstreamHTTP1 is HTTP/1.1 (the default).
	UpstreamHTTP1 UpstreamProtocol = iota
	// UpstreamHTTP2 is HTTP/2 with prior knowledge (h2c).
	UpstreamHTTP2
	// UpstreamDownstream is whatever the downstream request used
	// (use_downstream_protocol_config, protocol_selection
	// USE_DOWNSTREAM_PROTOCOL).
	UpstreamDownstream
)

// HTTP2Settings are the Http2ProtocolOptions fields strait honours; zero
// means the x/net/http2 default.
type HTTP2Settings struct {
	MaxConcurrentStreams        uint32
	InitialStreamWindowSize     uint32
	InitialConnectionWindowSize uint32
	// IdleTimeout (upstream common_http_protocol_options.idle_timeout)
	// closes a connection without streams for that long.
	IdleTimeout time.Duration
	// MaxRequestsPerConnection and MaxConnectionDuration (the same
	// options) retire a connection after that many streams or that long.
	MaxRequestsPerConnection uint32
	MaxConnectionDuration    time.Duration
	// KeepaliveInterval and KeepaliveTimeout (connection_keepalive): a
	// connection that has received no frame for KeepaliveInterval sends
	// a PING, and is closed when no frame (the ACK or any other) arrives
	// within KeepaliveTimeout. Envoy pings every interval even on a busy
	// connection but extends the timeout whenever any frame arrives
	// (codec_impl.cc, sendKeepalive / onKeepaliveResponse); a busy
	// connection is alive either way, so strait pings only a quiet one.
	KeepaliveInterval time.Duration
	KeepaliveTimeout  time.Duration
}

// ParseHTTP2Options validates Envoy's Http2ProtocolOptions found at field
// (for error messages) and returns what strait honours. A field it does not
// implement is an error that names it.
func ParseHTTP2Options(field string, o *corev3.Http2ProtocolOptions) (HTTP2Settings, error) {
	if err := fieldaudit.Only(field, o.ProtoReflect(), http2OptionsFields); err != nil {
		return HTTP2Settings{}, err
	}
	s := HTTP2Settings{
		MaxConcurrentStreams:        o.GetMaxConcurrentStreams().GetValue(),
		InitialStreamWindowSize:     o.GetInitialStreamWindowSize().GetValue(),
		InitialConnectionWindowSize: o.GetInitialConnectionWindowSize().GetValue(),
	}
	if ka := o.GetConnectionKeepalive(); ka != nil {
		kf := field + ".connection_keepalive"
		// interval_jitter (Envoy's default 15 %) and
		// connection_idle_interval (a PING before reusing an idle
		// connection) are not implemented.
		if err := fieldaudit.Only(kf, ka.ProtoReflect(), keepaliveFields); err != nil {
			return HTTP2Settings{}, err
		}
		if ka.GetTimeout() == nil || ka.GetTimeout().AsDuration() < time.Millisecond {
			return HTTP2Settings{}, fmt.Errorf("%s.timeout is required and must be at least 1ms (how long to wait for a PING's ACK)", kf)
		}
		if iv := ka.GetInterval(); iv != nil && iv.AsDuration() < time.Millisecond {
			return HTTP2Settings{}, fmt.Errorf("%s.interval must be at least 1ms (e.g. 30s), or unset for no PINGs", kf)
		}
		s.KeepaliveInterval = ka.GetInterval().AsDuration()
		s.KeepaliveTimeout = ka.GetTimeout().AsDuration()
	}
	return s, nil
}

// httpProtocol reads a cluster's upstream HTTP protocol: the legacy
// http2_protocol_options / protocol_selection fields, or
// typed_extension_protocol_options[HttpProtocolOptionsKey] (what Istio
// emits; see its cluster builder's setUpstreamProtocol).
func httpProtocol(c *clusterv3.Cluster) (UpstreamProtocol, HTTP2Settings, error) {
	proto := UpstreamHTTP1
	var h2 HTTP2Settings
	if o := c.GetHttp2ProtocolOptions(); o != nil { //nolint:staticcheck // legacy field, still sent by older control planes
		s, err := ParseHTTP2Options("http2_protocol_options", o)
		if err != nil {
			return 0, h2, err
		}
		proto, h2 = UpstreamHTTP2, s
	}
	if c.GetProtocolSelection() == clusterv3.Cluster_USE_DOWNSTREAM_PROTOCOL { //nolint:staticcheck // legacy field
		proto = UpstreamDownstream
	}
	for k := range c.GetTypedExtensionProtocolOptions() {
		if k != HTTPProtocolOptionsKey {
			return 0, h2, fmt.Errorf("typed_extension_protocol_options[%q] is not supported (want %q)", k, HTTPProtocolOptionsKey)
		}
	}
	a := c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptionsKey]
	if a == nil {
		return proto, h2, nil
	}
	field := fmt.Sprintf("typed_extension_protocol_options[%q]", HTTPProtocolOptionsKey)
	var o upstreamhttp.HttpProtocolOptions
	if err := a.UnmarshalTo(&o); err != nil {
		return 0, h2, fmt.Errorf("%s: %w", field, err)
	}
	if err := fieldaudit.Only(field, o.ProtoReflect(), httpProtocolOptionsFields); err != nil {
		return 0, h2, err
	}
	// common_http_protocol_options is checked by the HTTP/1.1 pool's
	// configure, which refuses what neither pool honours; idle_timeout,
	// max_requests_per_connection and max_connection_duration are
	// honoured by both.
	common := o.GetCommonHttpProtocolOptions()
	if it := common.GetIdleTimeout(); it != nil {
		h2.IdleTimeout = it.AsDuration()
	}
	h2.MaxRequestsPerConnection = common.GetMaxRequestsPerConnection().GetValue()
	if d := common.GetMaxConnectionDuration(); d != nil {
		h2.MaxConnectionDuration = d.AsDuration()
	}
	withCommon := func(s HTTP2Settings) HTTP2Settings {
		s.IdleTimeout, s.MaxRequestsPerConnection, s.MaxConnectionDuration = h2.IdleTimeout, h2.MaxRequestsPerConnection, h2.MaxConnectionDuration
		return s
	}
	switch p := o.GetUpstreamProtocolOptions().(type) {
	case *upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_:
		switch pc := p.ExplicitHttpConfig.GetProtocolConfig().(type) {
		case *upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions:
			if err := fieldaudit.Only(field+".explicit_http_config.http_protocol_options", pc.HttpProtocolOptions.ProtoReflect(), noFields); err != nil {
				return 0, h2, err
			}
			return UpstreamHTTP1, HTTP2Settings{}, nil
		case *upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions:
			s, err := ParseHTTP2Options(field+".explicit_http_config.http2_protocol_options", pc.Http2ProtocolOptions)
			return UpstreamHTTP2, withCommon(s), err
		default:
			return 0, h2, fmt.Errorf("%s.explicit_http_config: %T is not supported (want http_protocol_options or http2_protocol_options)", field, pc)
		}
	case *upstreamhttp.HttpProtocolOptions_UseDownstreamProtocolConfig:
		u := p.UseDownstreamProtocolConfig
		f := field + ".use_downstream_protocol_config"
		if err := fieldaudit.Only(f, u.ProtoReflect(), downstreamProtocolConfigFields); err != nil {
			return 0, h2, err
		}
		if err := fieldaudit.Only(f+".http_protocol_options", u.GetHttpProtocolOptions().ProtoReflect(), noFields); err != nil {
			return 0, h2, err
		}
		s, err := ParseHTTP2Options(f+".http2_protocol_options", u.GetHttp2ProtocolOptions())
		return UpstreamDownstream, withCommon(s), err
	}
	return proto, h2, nil
}

// commonHTTPOptions returns the cluster's common_http_protocol_options: from
// typed_extension_protocol_options (HttpProtocolOptions), else from the
// deprecated Cluster field.
func commonHTTPOptions(c *clusterv3.Cluster) (*corev3.HttpProtocolOptions, error) {
	if a, ok := c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptionsKey]; ok {
		var o upstreamhttp.HttpProtocolOptions
		if err := a.UnmarshalTo(&o); err != nil {
			return nil, fmt.Errorf("typed_extension_protocol_options[%s]: %w", HTTPProtocolOptionsKey, err)
		}
		if o.GetCommonHttpProtocolOptions() != nil {
			return o.GetCommonHttpProtocolOptions(), nil
		}
	}
	return c.GetCommonHttpProtocolOptions(), nil //nolint:staticcheck // deprecated but still sent
}

// configure reads the pool's settings from the cluster: idle_timeout
// (Envoy's default 1 h; 0 disables it), max_requests_per_connection and
// max_connection_duration (a connection older than that is not reused).
// Fields of common_http_protocol_options the HTTP/1.1 pool can't honour
// are refused rather than ignored.
func (p *h1Pool) configure(c *clusterv3.Cluster) error {
	o, err := commonHTTPOptions(c)
	if err != nil {
		return err
	}
	p.idleTimeout = int64(defaultIdleTimeout / time.Second)
	if d := o.GetIdleTimeout(); d != nil {
		p.idleTimeout = int64(d.AsDuration() / time.Second)
		if d.AsDuration() > 0 && p.idleTimeout == 0 {
			p.idleTimeout = 1 // the pool's clock counts seconds
		}
	}
	if v := o.GetMaxRequestsPerConnection(); v != nil {
		p.maxRequests = v.GetValue()
	}
	const field = "common_http_protocol_options."
	if d := o.GetMaxConnectionDuration(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return fmt.Errorf("%smax_connection_duration %v is not a valid duration", field, d)
		}
		// Counted in the pool's whole seconds, at least one.
		p.maxDuration = int64(d.AsDuration() / time.Second)
		if d.AsDuration() > 0 && p.maxDuration == 0 {
			p.maxDuration = 1
		}
	}
	switch {
	case o.GetMaxStreamDuration() != nil:
		return fmt.Errorf("%smax_stream_duration is not supported (remove it)", field)
	case o.GetMaxHeadersCount() != nil && o.GetMaxHeadersCount().GetValue() != 100:
		return fmt.Errorf("%smax_headers_count %d is not supported for upstream responses (only Envoy's default 100)", field, o.GetMaxHeadersCount().GetValue())
	case o.GetMaxResponseHeadersKb() != nil && o.GetMaxResponseHeadersKb().GetValue() != 60:
		return fmt.Errorf("%smax_response_headers_kb %d is not supported (only the default 60)", field, o.GetMaxResponseHeadersKb().GetValue())
	case o.GetHeadersWithUnderscoresAction() != corev3.HttpProtocolOptions_ALLOW:
		return fmt.Errorf("%sheaders_with_underscores_action %s is not supported (only ALLOW)", field, o.GetHeadersWithUnderscoresAction())
	case o.GetMaxConnectionDurationJitter() != nil:
		return fmt.Errorf("%smax_connection_duration_jitter is not supported (remove it)", field)
	}
	return nil
}
