package bootstrap

import (
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestBootstrapFieldsClassified: every field of the Bootstrap and of the
// parts strait-proxy reads is honoured or refused, so that a new Envoy
// API's field is noticed here; the allow-lists name only real fields.
func TestBootstrapFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&bootstrapv3.Bootstrap{}).ProtoReflect().Descriptor(), bootstrapHonoured, bootstrapRefused)
	fieldtest.Classified(t, (&bootstrapv3.Bootstrap_StaticResources{}).ProtoReflect().Descriptor(), staticHonoured, staticRefused)
	fieldtest.Classified(t, (&bootstrapv3.Bootstrap_DynamicResources{}).ProtoReflect().Descriptor(), dynamicHonoured, dynamicRefused)
	fieldtest.Classified(t, (&corev3.ApiConfigSource{}).ProtoReflect().Descriptor(), adsHonoured, adsRefused)
	fieldtest.Classified(t, (&bootstrapv3.Admin{}).ProtoReflect().Descriptor(), adminHonoured, adminRefused)
	fieldtest.Known(t, (&corev3.GrpcService{}).ProtoReflect().Descriptor(), grpcServiceFields)
	fieldtest.Known(t, (&corev3.GrpcService_EnvoyGrpc{}).ProtoReflect().Descriptor(), envoyGrpcFields)
	fieldtest.Known(t, (&corev3.ConfigSource{}).ProtoReflect().Descriptor(), subscriptionFields)
}

// adsBootstrap is a valid bootstrap with ADS, the shape strait-agent
// writes.
func adsBootstrap() *bootstrapv3.Bootstrap {
	b := &bootstrapv3.Bootstrap{}
	js := `{
	  "node": {"id": "sidecar~10.1.0.2~a.demo~demo.svc.cluster.local"},
	  "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 15000}}},
	  "dynamic_resources": {
	    "lds_config": {"ads": {}, "resource_api_version": "V3"},
	    "cds_config": {"ads": {}, "resource_api_version": "V3"},
	    "ads_config": {"api_type": "GRPC", "transport_api_version": "V3", "set_node_on_first_message_only": true,
	      "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}]}
	  },
	  "static_resources": {"clusters": [{"name": "xds-grpc", "type": "STATIC", "connect_timeout": "1s",
	    "load_assignment": {"cluster_name": "xds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": "/x/XDS"}}}}]}]}}]}
	}`
	if err := protojson.Unmarshal([]byte(js), b); err != nil {
		panic(err)
	}
	return b
}

// parseMessage runs Parse on b's JSON, as a bootstrap file is read.
func parseMessage(t *testing.T, b *bootstrapv3.Bootstrap) error {
	t.Helper()
	js, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(js)
	return err
}

// TestBootstrapRefusedFields: each refused field, set, is an error naming
// it by its path; the bootstrap without it parses.
func TestBootstrapRefusedFields(t *testing.T) {
	if err := parseMessage(t, adsBootstrap()); err != nil {
		t.Fatalf("the valid bootstrap: %v", err)
	}
	for _, tc := range []struct {
		prefix  string
		refused map[protoreflect.Name]string
		msg     func(*bootstrapv3.Bootstrap) protoreflect.Message
	}{
		{"", bootstrapRefused, func(b *bootstrapv3.Bootstrap) protoreflect.Message { return b.ProtoReflect() }},
		{"static_resources.", staticRefused, func(b *bootstrapv3.Bootstrap) protoreflect.Message { return b.GetStaticResources().ProtoReflect() }},
		{"dynamic_resources.", dynamicRefused, func(b *bootstrapv3.Bootstrap) protoreflect.Message { return b.GetDynamicResources().ProtoReflect() }},
		{"dynamic_resources.ads_config.", adsRefused, func(b *bootstrapv3.Bootstrap) protoreflect.Message {
			return b.GetDynamicResources().GetAdsConfig().ProtoReflect()
		}},
		{"admin.", adminRefused, func(b *bootstrapv3.Bootstrap) protoreflect.Message { return b.GetAdmin().ProtoReflect() }},
	} {
		for n := range tc.refused {
			t.Run(tc.prefix+string(n), func(t *testing.T) {
				b := adsBootstrap()
				m := tc.msg(b)
				fieldtest.SetSomething(m, m.Descriptor().Fields().ByName(n))
				err := checkFields(b)
				if want := tc.prefix + string(n) + " is not supported"; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %v, want an error containing %q", err, want)
				}
			})
		}
	}
}

// TestBootstrapADSRefused: the ADS subscriptions strait-proxy would not
// follow as written are refused at parse time, naming the field.
func TestBootstrapADSRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*bootstrapv3.Bootstrap)
		want string
	}{
		"two ADS servers": {func(b *bootstrapv3.Bootstrap) {
			ads := b.GetDynamicResources().GetAdsConfig()
			ads.GrpcServices = append(ads.GrpcServices, proto.Clone(ads.GrpcServices[0]).(*corev3.GrpcService))
		}, "dynamic_resources.ads_config.grpc_services has 2 services"},
		"grpc timeout": {func(b *bootstrapv3.Bootstrap) {
			b.GetDynamicResources().GetAdsConfig().GrpcServices[0].Timeout = durationpbSecond()
		}, "dynamic_resources.ads_config.grpc_services[0].timeout is not supported"},
		"envoy_grpc authority": {func(b *bootstrapv3.Bootstrap) {
			b.GetDynamicResources().GetAdsConfig().GrpcServices[0].GetEnvoyGrpc().Authority = "xds"
		}, "dynamic_resources.ads_config.grpc_services[0].envoy_grpc.authority is not supported"},
		"v2 transport": {func(b *bootstrapv3.Bootstrap) {
			b.GetDynamicResources().GetAdsConfig().TransportApiVersion = corev3.ApiVersion_V2
		}, "transport_api_version V2 is not supported"},
		"lds from a path": {func(b *bootstrapv3.Bootstrap) {
			b.GetDynamicResources().LdsConfig = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Path{Path: "/etc/lds.yaml"}}
		}, "dynamic_resources.lds_config.path is not supported"},
		"cds without ads_config": {func(b *bootstrapv3.Bootstrap) {
			b.GetDynamicResources().AdsConfig = nil
			b.GetDynamicResources().LdsConfig = nil
		}, "dynamic_resources.cds_config: ads needs dynamic_resources.ads_config"},
		"v2 resources": {func(b *bootstrapv3.Bootstrap) {
			b.GetDynamicResources().GetCdsConfig().ResourceApiVersion = corev3.ApiVersion_V2
		}, "dynamic_resources.cds_config.resource_api_version V2 is not supported"},
	} {
		t.Run(name, func(t *testing.T) {
			b := adsBootstrap()
			tc.edit(b)
			err := parseMessage(t, b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func durationpbSecond() *durationpb.Duration { return durationpb.New(time.Second) }
