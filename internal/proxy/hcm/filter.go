// Package hcm is the HTTP connection manager network filter: it serves
// HTTP/1.1 and HTTP/2 (h2c, h2.go) on downstream connections, routes each
// request with a route table (inline or RDS) and forwards it to a cluster,
// in HTTP/1.1 or HTTP/2 as the cluster says.
//
// The codec is behind Server.ServeConn and the cluster's upstream pool. The
// default is the purpose-built HTTP/1.1 codec in package http1 (h1.go is the
// request path on it, cluster.GetConn/PutConn its upstream pool); net/http
// (server and cluster.RoundTrip) remains selectable with CodecNetHTTP
// (strait-proxy --http-codec nethttp).
package hcm

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/route"
)

// Name is the network filter name.
const Name = "envoy.filters.network.http_connection_manager"

const routerFilter = "envoy.filters.http.router"

// ignoredHTTPFilters are HTTP filters we accept and do not run yet.
var ignoredHTTPFilters = map[string]bool{
	"envoy.filters.http.cors":       true,
	"envoy.filters.http.fault":      true,
	"envoy.filters.http.grpc_stats": true,
	"istio.alpn":                    true,
	"istio.stats":                   true,
	"istio.metadata_exchange":       true,
}

// Routes is where RDS route tables come from.
type Routes interface {
	Get(name string) *route.Table
}

// Filter is one configured HCM. It is immutable; a connection keeps the
// Filter it was accepted with until it closes.
type Filter struct {
	StatPrefix string
	RDSName    string // set when routes come from RDS
	inline     *route.Table
	routes     Routes
	codec      hcmv3.HttpConnectionManager_CodecType
	h2         *http2.Server   // serves HTTP/2 connections (h2.go)
	upgrades   map[string]bool // upgrade_configs: allowed Upgrade protocols, lower case (upgrade.go)
}

// Build validates an HCM config and returns the filter.
func Build(h *hcmv3.HttpConnectionManager, routes Routes) (*Filter, error) {
	f := &Filter{StatPrefix: h.GetStatPrefix(), routes: routes}
	if err := f.buildCodec(h); err != nil {
		return nil, err
	}
	if err := f.buildUpgrades(h); err != nil {
		return nil, err
	}
	switch rs := h.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		if cs := rs.Rds.GetConfigSource(); cs.GetAds() == nil {
			return nil, fmt.Errorf("rds.config_source must be {ads: {}}, got %v", configSourceKind(cs))
		}
		f.RDSName = rs.Rds.GetRouteConfigName()
	case *hcmv3.HttpConnectionManager_RouteConfig:
		t, err := route.Compile(rs.RouteConfig)
		if err != nil {
			return nil, err
		}
		f.inline = t
	default:
		return nil, fmt.Errorf("route specifier %T is not supported (want rds or route_config)", rs)
	}
	filters := h.GetHttpFilters()
	if len(filters) == 0 || filters[len(filters)-1].GetName() != routerFilter {
		return nil, fmt.Errorf("http_filters must end with %s", routerFilter)
	}
	for _, hf := range filters[:len(filters)-1] {
		if !ignoredHTTPFilters[hf.GetName()] && !hf.GetIsOptional() {
			return nil, fmt.Errorf("http filter %q is not supported", hf.GetName())
		}
	}
	return f, nil
}

func configSourceKind(cs *corev3.ConfigSource) string {
	if cs == nil {
		return "nothing"
	}
	return fmt.Sprintf("%T", cs.GetConfigSourceSpecifier())
}

// table returns the route table to use for the next request.
func (f *Filter) table() *route.Table {
	if f.inline != nil {
		return f.inline
	}
	return f.routes.Get(f.RDSName)
}
