package cluster

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// commonHTTPOptions returns the cluster's common_http_protocol_options: from
// typed_extension_protocol_options (HttpProtocolOptions), else from the
// deprecated Cluster field.
func commonHTTPOptions(c *clusterv3.Cluster) (*corev3.HttpProtocolOptions, error) {
	if a, ok := c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptionsKey]; ok {
		var o upstreamhttpv3.HttpProtocolOptions
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
