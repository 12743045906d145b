// Package bootstrap builds the proxy's Envoy v3 bootstrap: node identity,
// the admin address, ADS through the agent's xDS proxy on a Unix socket
// (the "xds-grpc" cluster), SDS on the workload socket (the "sds-grpc"
// cluster) and the 15090 Prometheus listener.
//
// The bootstrap is built as the JSON document protojson writes for
// Envoy's bootstrapv3.Bootstrap (proto field names, unset and zero fields
// left out), not from go-control-plane's config types: linking those
// (bootstrap, cluster, listener, route, the HTTP connection manager and
// what they import) made strait-agent ~9 MB larger, and a Go binary's
// text and rodata are resident in every sidecar (bench/sidecar). The
// tests parse the document into bootstrapv3.Bootstrap, validate it, and
// compare it with the same bootstrap built from those types.
package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/straitmesh/strait/internal/locality"
)

// Names fixed by the contract (docs/contracts.md).
const (
	XDSClusterName         = "xds-grpc"
	SDSClusterName         = "sds-grpc"
	PrometheusClusterName  = "prometheus_stats"
	PrometheusListener     = "prometheus_stats_listener"
	PrometheusPath         = "/stats/prometheus"
	DefaultPrometheusPort  = 15090
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// Type URLs of the typed configs the bootstrap holds.
const (
	typeHTTPProtocolOptions = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	typeHCM                 = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
	typeRouter              = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
)

// podTemplateHash is the label pilot-agent leaves out of LABELS
// (Istio's pkg/bootstrap DefaultDeploymentUniqueLabelKey).
const podTemplateHash = "pod-template-hash"

// Options are the inputs of Build; the agent fills them from its Config.
type Options struct {
	NodeID   string
	Cluster  string
	Metadata map[string]string
	// Labels are the pod's labels, written as the LABELS struct of the
	// node metadata as pilot-agent writes them (without
	// pod-template-hash): the workload's app, version and canonical
	// service that Istio's metadata exchange and istio.stats read.
	Labels map[string]string
	// AdminPort is the proxy's admin port on 127.0.0.1 (15000).
	AdminPort int
	// XDSSocketPath is the agent's xDS proxy Unix socket (absolute).
	XDSSocketPath string
	// PrometheusPort is the stats listener's port (0 = 15090).
	PrometheusPort int
	// SDSSocketPath is the agent's SDS socket (Istio's workload socket),
	// declared as the "sds-grpc" cluster that TLS contexts name; empty:
	// no such cluster.
	SDSSocketPath string
	// Locality is node.locality as "region/zone/subzone"; empty: none
	// (straitd then takes the workload's locality from its registry).
	Locality string
}

// Bootstrap is a built bootstrap: the JSON object of an Envoy v3
// Bootstrap, as protojson (UseProtoNames) would write it.
type Bootstrap struct {
	doc obj
}

// obj is a JSON object.
type obj = map[string]any

// Build returns the bootstrap. It refuses what Envoy's validation rules
// (the protoc-gen-validate rules go-control-plane's ValidateAll checks)
// or protojson would: an empty pipe path, a port above 65535, a string
// that is not UTF-8.
func Build(o Options) (*Bootstrap, error) {
	if o.PrometheusPort == 0 {
		o.PrometheusPort = DefaultPrometheusPort
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	md := obj{}
	for k, v := range o.Metadata {
		md[k] = v
	}
	if len(o.Labels) > 0 {
		labels := obj{}
		for k, v := range o.Labels {
			if k != podTemplateHash {
				labels[k] = v
			}
		}
		md["LABELS"] = labels
	}
	node := obj{"metadata": md}
	setString(node, "id", o.NodeID)
	setString(node, "cluster", o.Cluster)
	if l := nodeLocality(o.Locality); l != nil {
		node["locality"] = l
	}
	ads := func() obj { return obj{"ads": obj{}, "resource_api_version": "V3"} }
	clusters := []any{
		staticCluster(XDSClusterName, time.Second, pipeAddress(o.XDSSocketPath), true),
		staticCluster(PrometheusClusterName, 250*time.Millisecond, socketAddress("127.0.0.1", o.AdminPort), false),
	}
	if o.SDSSocketPath != "" {
		// As Istio's bootstrap (tools/packaging/common/envoy_bootstrap.json
		// "sds-grpc"): a static HTTP/2 cluster on the workload socket.
		clusters = append(clusters, staticCluster(SDSClusterName, time.Second, pipeAddress(o.SDSSocketPath), true))
	}
	return &Bootstrap{doc: obj{
		"node":  node,
		"admin": obj{"address": socketAddress("127.0.0.1", o.AdminPort)},
		"dynamic_resources": obj{
			"ads_config": obj{
				"api_type":                       "GRPC",
				"transport_api_version":          "V3",
				"grpc_services":                  []any{obj{"envoy_grpc": obj{"cluster_name": XDSClusterName}}},
				"set_node_on_first_message_only": true,
			},
			"cds_config": ads(),
			"lds_config": ads(),
		},
		"static_resources": obj{
			"clusters":  clusters,
			"listeners": []any{prometheusListener(o.PrometheusPort)},
		},
	}}, nil
}

// validate checks what the bootstrap's validation rules and protojson
// check on the fields Options fill.
func (o Options) validate() error {
	if o.XDSSocketPath == "" {
		return fmt.Errorf("xds-grpc: the xDS socket path is empty (Pipe.path must not be)")
	}
	for name, port := range map[string]int{"admin port": o.AdminPort, "prometheus port": o.PrometheusPort} {
		if port < 0 || port > 65535 {
			return fmt.Errorf("%s %d is not in 0-65535", name, port)
		}
	}
	strs := []string{o.NodeID, o.Cluster, o.XDSSocketPath, o.SDSSocketPath, o.Locality}
	for k, v := range o.Metadata {
		strs = append(strs, k, v)
	}
	for k, v := range o.Labels {
		strs = append(strs, k, v)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%q is not valid UTF-8", s)
		}
	}
	return nil
}

// staticCluster is a STATIC cluster of one endpoint (lb_policy
// ROUND_ROBIN, the default, is left out as protojson leaves it out),
// speaking HTTP/2 upstream when http2 is set (explicit_http_config).
func staticCluster(name string, connectTimeout time.Duration, addr obj, http2 bool) obj {
	c := obj{
		"name":            name,
		"type":            "STATIC",
		"connect_timeout": durationJSON(connectTimeout),
		"load_assignment": obj{
			"cluster_name": name,
			"endpoints":    []any{obj{"lb_endpoints": []any{obj{"endpoint": obj{"address": addr}}}}},
		},
	}
	if http2 {
		c["typed_extension_protocol_options"] = obj{httpProtocolOptionsKey: obj{
			"@type":                typeHTTPProtocolOptions,
			"explicit_http_config": obj{"http2_protocol_options": obj{}},
		}}
	}
	return c
}

// prometheusListener serves /stats/prometheus on port from the proxy's
// admin (the prometheus_stats cluster), as Istio's bootstrap does.
func prometheusListener(port int) obj {
	hcm := obj{
		"@type":       typeHCM,
		"stat_prefix": "stats",
		"route_config": obj{
			"virtual_hosts": []any{obj{
				"name":    "backend",
				"domains": []any{"*"},
				"routes": []any{obj{
					"match": obj{"prefix": PrometheusPath},
					"route": obj{"cluster": PrometheusClusterName},
				}},
			}},
		},
		"http_filters": []any{obj{
			"name":         "envoy.filters.http.router",
			"typed_config": obj{"@type": typeRouter},
		}},
	}
	return obj{
		"name":    PrometheusListener,
		"address": socketAddress("0.0.0.0", port),
		"filter_chains": []any{obj{
			"filters": []any{obj{
				"name":         "envoy.filters.network.http_connection_manager",
				"typed_config": hcm,
			}},
		}},
	}
}

// socketAddress is a TCP socket address (protocol TCP, the default, is
// left out as protojson leaves it out; port_value is a oneof member, so
// it is written even when 0).
func socketAddress(ip string, port int) obj {
	return obj{"socket_address": obj{"address": ip, "port_value": port}}
}

func pipeAddress(path string) obj {
	return obj{"pipe": obj{"path": path}}
}

// durationJSON writes d as protojson writes a google.protobuf.Duration:
// seconds with 0, 3, 6 or 9 fractional digits ("1s", "0.250s").
func durationJSON(d time.Duration) string {
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	s := strconv.FormatInt(secs, 10)
	if nanos != 0 {
		frac := fmt.Sprintf("%09d", nanos)
		for len(frac) > 3 && frac[len(frac)-3:] == "000" {
			frac = frac[:len(frac)-3]
		}
		s += "." + frac
	}
	return s + "s"
}

func setString(o obj, key, v string) {
	if v != "" {
		o[key] = v
	}
}

// nodeLocality is node.locality for "region/zone/subzone"; nil for "".
func nodeLocality(s string) obj {
	if s == "" {
		return nil
	}
	l := locality.Parse(s)
	out := obj{}
	setString(out, "region", l.Region)
	setString(out, "zone", l.Zone)
	setString(out, "sub_zone", l.Subzone)
	return out
}

// Marshal renders b as indented JSON with proto field names (as Envoy and
// Istio write bootstraps), byte-stable for golden files and diffs: map
// keys come out sorted.
func Marshal(b *Bootstrap) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(b.doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write marshals b to path atomically (temp file + rename), creating the
// directory, so the proxy never reads a half-written bootstrap.
func Write(path string, b *Bootstrap) error {
	data, err := Marshal(b)
	if err != nil {
		return fmt.Errorf("marshal bootstrap: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write bootstrap: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write bootstrap: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write bootstrap %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write bootstrap %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write bootstrap: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write bootstrap: %w", err)
	}
	return nil
}
