package istiostats

import "google.golang.org/protobuf/reflect/protoreflect"

// honoured are the PluginConfig fields the filter reads or that do not
// change what it records; the others (metric overrides and definitions,
// series expiry, the waypoint reporter) are refused until implemented.
var honoured = map[protoreflect.Name]string{
	"disable_host_header_fallback": "",
	"tcp_reporting_duration":       "read by the TCP filter; an HTTP filter has no periodic report",
	"debug":                        "logging only",
	"max_peer_cache_size":          "peers are cached by istio.metadata_exchange, bounded",
	"stat_prefix":                  "only istio_ (checked in Parse)",
	"field_separator":              "Envoy's internal tag encoding, not in the Prometheus output",
	"value_separator":              "Envoy's internal tag encoding, not in the Prometheus output",
	"reporter":                     "UNSPECIFIED only (checked in Parse)",
	"metrics":                      "name and drop only (checked in Parse): the Telemetry API's disabled metrics",
}
