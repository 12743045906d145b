package cluster

import (
	"errors"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// checkOriginalDst refuses the original_dst_lb_config fields an
// ORIGINAL_DST cluster here does not implement: it always dials the
// downstream connection's original destination, never one taken from a
// request header or metadata, on its own port.
func checkOriginalDst(c *clusterv3.Cluster) error {
	o := c.GetOriginalDstLbConfig()
	switch {
	case o == nil:
		return nil
	case o.GetUseHttpHeader():
		return errors.New("original_dst_lb_config.use_http_header is not supported (the original destination is the connection's)")
	case o.GetHttpHeaderName() != "":
		return errors.New("original_dst_lb_config.http_header_name is not supported (the original destination is the connection's)")
	case o.GetUpstreamPortOverride() != nil:
		return errors.New("original_dst_lb_config.upstream_port_override is not supported yet (remove it)")
	case o.GetMetadataKey() != nil:
		return errors.New("original_dst_lb_config.metadata_key is not supported (the original destination is the connection's)")
	}
	return nil
}
