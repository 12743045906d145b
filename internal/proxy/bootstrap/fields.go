package bootstrap

import (
	"errors"
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// This file is the bootstrap's field audit: every Bootstrap field, and
// every field of the parts strait-proxy reads (static resources, the ADS
// subscription, the admin address), is honoured (the code named reads it)
// or refused by name with the fix, so that a bootstrap asking for what
// strait-proxy does not do (a runtime, a watchdog, tracing, stats sinks,
// a second ADS server) fails at start-up instead of running without it.
// TestBootstrapFieldsClassified fails on a Bootstrap field in neither list. The node is
// sent to the management server whole, so none of its fields is audited.

// bootstrapHonoured maps each honoured Bootstrap field to the code that
// reads it.
var bootstrapHonoured = map[protoreflect.Name]string{
	"node":              "xdsclient.Options.Node: sent to the management server as given",
	"static_resources":  "proxy.New: the static clusters and listeners (staticHonoured)",
	"dynamic_resources": "ADSCluster and proxy.New: the ADS subscription (dynamicHonoured)",
	"admin":             "AdminAddress (adminHonoured)",
}

// bootstrapRefused maps each refused Bootstrap field to why, and the fix.
var bootstrapRefused = map[protoreflect.Name]string{
	"node_context_params":              "xdstp:// resource names are not resolved; remove it",
	"cluster_manager":                  "no cluster manager option (local cluster, outlier event log, upstream bind) is read; remove it",
	"hds_config":                       "the health discovery service is not implemented; remove it",
	"flags_path":                       "no flag files are read; remove it",
	"stats_sinks":                      "stats are served by the admin endpoint only (/stats, /stats/prometheus); remove it",
	"deferred_stat_options":            "stats are created when first used; remove it",
	"stats_config":                     "stats keep their names and tags as strait-proxy writes them; remove it",
	"stats_flush_interval":             "there are no stats sinks to flush to; remove it",
	"stats_flush_on_admin":             "there are no stats sinks to flush to; remove it",
	"stats_eviction_interval":          "stats are never evicted; remove it",
	"watchdog":                         "there is no watchdog; remove it",
	"watchdogs":                        "there is no watchdog; remove it",
	"tracing":                          "tracing is not implemented; remove it",
	"layered_runtime":                  "there is no runtime; remove it",
	"overload_manager":                 "there is no overload manager; remove it",
	"enable_dispatcher_stats":          "there are no dispatcher stats; remove it",
	"header_prefix":                    "headers keep the x-envoy- prefix; remove it",
	"stats_server_version_override":    "server stats carry no version; remove it",
	"use_tcp_for_dns_lookups":          "DNS is resolved by the cluster's resolver settings only; remove it",
	"dns_resolution_config":            "DNS is resolved by the cluster's resolver settings only; remove it",
	"typed_dns_resolver_config":        "DNS is resolved by the cluster's resolver settings only; remove it",
	"bootstrap_extensions":             "no bootstrap extension is loaded; remove it",
	"fatal_actions":                    "no fatal action is run; remove it",
	"config_sources":                   "xdstp:// resources are not resolved (ADS only); remove it",
	"default_config_source":            "xdstp:// resources are not resolved (ADS only); remove it",
	"default_socket_interface":         "sockets are the kernel's; remove it",
	"certificate_provider_instances":   "certificates come from TLS contexts and SDS only; remove it",
	"inline_headers":                   "headers are not kept in Envoy's header maps; remove it",
	"perf_tracing_file_path":           "there is no performance tracing; remove it",
	"default_regex_engine":             "regexes are always RE2 semantics (Go's regexp); remove it",
	"xds_delegate_extension":           "no xDS extension is loaded; remove it",
	"xds_config_tracker_extension":     "no xDS extension is loaded; remove it",
	"listener_manager":                 "the listener manager is built in; remove it",
	"application_log_config":           "strait-proxy's own logs are set by its flags; remove it",
	"grpc_async_client_manager_config": "gRPC clients are grpc-go's; remove it",
	"memory_allocator_manager":         "memory is the Go runtime's; remove it",
	"enable_worker_cpu_affinity":       "workers are goroutines, not pinned threads; remove it",
}

// staticHonoured and staticRefused classify StaticResources fields.
var (
	staticHonoured = map[protoreflect.Name]string{
		"clusters":  "proxy.New: Clusters.AddStatic",
		"listeners": "proxy.New: Listeners.AddStatic",
	}
	staticRefused = map[protoreflect.Name]string{
		"secrets": "static secrets are not looked up by name; put the certificate in the TLS context or serve it over SDS",
	}
)

// dynamicHonoured and dynamicRefused classify DynamicResources fields.
var (
	dynamicHonoured = map[protoreflect.Name]string{
		"ads_config": "ADSCluster: one envoy_grpc service (checkADSConfig)",
		"cds_config": "ADS only, with its initial_fetch_timeout (checkSubscription)",
		"lds_config": "ADS only, with its initial_fetch_timeout (checkSubscription)",
	}
	dynamicRefused = map[protoreflect.Name]string{
		"cds_resources_locator": "xdstp:// resources are not resolved; use cds_config with ads",
		"lds_resources_locator": "xdstp:// resources are not resolved; use lds_config with ads",
	}
)

// adsHonoured and adsRefused classify the ADS ApiConfigSource's fields.
var (
	adsHonoured = map[protoreflect.Name]string{
		"api_type":                       "ADSCluster: GRPC or AGGREGATED_GRPC",
		"transport_api_version":          "checkADSConfig: V3 (or unset)",
		"grpc_services":                  "ADSCluster: exactly one, envoy_grpc (checkADSConfig)",
		"set_node_on_first_message_only": "xdsclient.Options.NodeOnFirstRequestOnly",
	}
	adsRefused = map[protoreflect.Name]string{
		"cluster_names":       "ADS names its cluster in grpc_services[0].envoy_grpc; remove it",
		"refresh_delay":       "only REST polls; remove it",
		"request_timeout":     "only REST polls; remove it",
		"rate_limit_settings": "requests to the management server are not rate limited; remove it",
		"config_validators":   "no config validator extension is loaded; remove it",
	}
	// grpcServiceFields and envoyGrpcFields: the ADS server is a cluster
	// of the bootstrap reached with grpc-go's defaults.
	grpcServiceFields = map[protoreflect.Name]bool{"envoy_grpc": true}
	envoyGrpcFields   = map[protoreflect.Name]bool{"cluster_name": true}
	// subscriptionFields: a cds_config or lds_config is ADS.
	subscriptionFields = map[protoreflect.Name]bool{"ads": true, "initial_fetch_timeout": true, "resource_api_version": true}
)

// adminHonoured and adminRefused classify Admin fields.
var (
	adminHonoured = map[protoreflect.Name]string{
		"address":                  "AdminAddress: a socket_address",
		"ignore_global_conn_limit": "there is no global connection limit to be exempt from",
	}
	adminRefused = map[protoreflect.Name]string{
		"access_log":      "admin requests are not logged; remove it",
		"access_log_path": "admin requests are not logged; remove it",
		"profile_path":    "the admin endpoint has no CPU profiler; remove it",
		"socket_options":  "no socket option is set from config; remove it",
		"allow_paths":     "every admin path is served; remove it",
	}
)

// checkFields refuses what b asks that strait-proxy does not implement.
func checkFields(b *bootstrapv3.Bootstrap) error {
	if err := fieldaudit.Check("", b.ProtoReflect(), bootstrapHonoured, bootstrapRefused); err != nil {
		return err
	}
	if s := b.GetStaticResources(); s != nil {
		if err := fieldaudit.Check("static_resources", s.ProtoReflect(), staticHonoured, staticRefused); err != nil {
			return err
		}
	}
	if a := b.GetAdmin(); a != nil {
		if err := fieldaudit.Check("admin", a.ProtoReflect(), adminHonoured, adminRefused); err != nil {
			return err
		}
	}
	d := b.GetDynamicResources()
	if d == nil {
		return nil
	}
	if err := fieldaudit.Check("dynamic_resources", d.ProtoReflect(), dynamicHonoured, dynamicRefused); err != nil {
		return err
	}
	if err := checkADSConfig(d.GetAdsConfig()); err != nil {
		return err
	}
	for _, sub := range []struct {
		field string
		cs    *corev3.ConfigSource
	}{{"cds_config", d.GetCdsConfig()}, {"lds_config", d.GetLdsConfig()}} {
		if sub.cs == nil {
			continue
		}
		if err := checkSubscription("dynamic_resources."+sub.field, sub.cs, d.GetAdsConfig() != nil); err != nil {
			return err
		}
	}
	return nil
}

// checkADSConfig refuses an ADS config source strait-proxy would not
// follow: more than one gRPC service, a v2 transport, or gRPC settings the
// client does not apply.
func checkADSConfig(ads *corev3.ApiConfigSource) error {
	if ads == nil {
		return nil
	}
	const f = "dynamic_resources.ads_config"
	if err := fieldaudit.Check(f, ads.ProtoReflect(), adsHonoured, adsRefused); err != nil {
		return err
	}
	if v := ads.GetTransportApiVersion(); v != corev3.ApiVersion_AUTO && v != corev3.ApiVersion_V3 {
		return fmt.Errorf("%s.transport_api_version %s is not supported by strait-proxy (want V3)", f, v)
	}
	if n := len(ads.GetGrpcServices()); n > 1 {
		return fmt.Errorf("%s.grpc_services has %d services; strait-proxy connects to one management server (no failover): list one", f, n)
	}
	for i, gs := range ads.GetGrpcServices() {
		p := fmt.Sprintf("%s.grpc_services[%d]", f, i)
		if err := fieldaudit.Only(p, gs.ProtoReflect(), grpcServiceFields); err != nil {
			return err
		}
		if err := fieldaudit.Only(p+".envoy_grpc", gs.GetEnvoyGrpc().ProtoReflect(), envoyGrpcFields); err != nil {
			return err
		}
	}
	return nil
}

// checkSubscription refuses a cds_config or lds_config that is not ADS:
// strait-proxy subscribes to both on the ADS stream only.
func checkSubscription(field string, cs *corev3.ConfigSource, hasADS bool) error {
	if err := fieldaudit.Only(field, cs.ProtoReflect(), subscriptionFields); err != nil {
		return err
	}
	if cs.GetAds() == nil {
		return fmt.Errorf("%s: only ads is supported by strait-proxy; set ads: {}", field)
	}
	if !hasADS {
		return errors.New(field + ": ads needs dynamic_resources.ads_config")
	}
	if v := cs.GetResourceApiVersion(); v != corev3.ApiVersion_AUTO && v != corev3.ApiVersion_V3 {
		return fmt.Errorf("%s.resource_api_version %s is not supported by strait-proxy (want V3)", field, v)
	}
	return nil
}
