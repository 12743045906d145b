package settings

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"
)

// ProxyConfig defaults. They are Istio's (mesh.DefaultProxyConfig) except
// binaryPath, which defaults to strait-proxy beside the agent's executable
// and is filled in by Load.
//
// DefaultDiscoveryAddress is Istio's default, TLS on 15012: straitd serves
// xDS and its CA there, and the agent dials it with TLS trusting the mesh
// root mounted at ./var/run/secrets/istio/root-cert.pem (loadIdentity says
// when the agent uses TLS). straitd's plaintext port 15010 works too.
const (
	DefaultConfigPath               = "./etc/istio/proxy"
	DefaultDiscoveryAddress         = "istiod.istio-system.svc:15012"
	DefaultProxyAdminPort           = 15000
	DefaultStatusPort               = 15020
	DefaultConcurrency              = 2
	DefaultDrainDuration            = 45 * time.Second
	DefaultTerminationDrainDuration = 5 * time.Second
)

// DefaultProxyConfig returns the built-in base layer of the ProxyConfig merge.
func DefaultProxyConfig() *meshv1alpha1.ProxyConfig {
	return &meshv1alpha1.ProxyConfig{
		ConfigPath:               DefaultConfigPath,
		DiscoveryAddress:         DefaultDiscoveryAddress,
		ProxyAdminPort:           DefaultProxyAdminPort,
		StatusPort:               DefaultStatusPort,
		Concurrency:              wrapperspb.Int32(DefaultConcurrency),
		DrainDuration:            durationpb.New(DefaultDrainDuration),
		TerminationDrainDuration: durationpb.New(DefaultTerminationDrainDuration),
	}
}

// ProxyConfigLayer is one source of the merge, named for error messages
// (e.g. "PROXY_CONFIG" or "/etc/istio/config/mesh").
type ProxyConfigLayer struct {
	Source string
	Config *meshv1alpha1.ProxyConfig
}

// MergeProxyConfig applies layers in order over a copy of base; a field set
// in a later layer overwrites the earlier value (proto.Merge semantics:
// scalars that are set and non-zero, messages merged, lists appended).
// Istio's order is: defaults, mesh file defaultConfig, PROXY_CONFIG, the
// proxy.istio.io/config annotation — so the annotation wins.
func MergeProxyConfig(base *meshv1alpha1.ProxyConfig, layers ...ProxyConfigLayer) *meshv1alpha1.ProxyConfig {
	out := proto.Clone(base).(*meshv1alpha1.ProxyConfig)
	for _, l := range layers {
		if l.Config != nil {
			proto.Merge(out, l.Config)
		}
	}
	return out
}

// ParseProxyConfigJSON parses a JSON ProxyConfig (protojson field names,
// e.g. {"discoveryAddress":"straitd:15010"}) and checks the fields it sets.
// Errors are prefixed with source.
func ParseProxyConfigJSON(source string, data []byte) (*meshv1alpha1.ProxyConfig, error) {
	pc := &meshv1alpha1.ProxyConfig{}
	if err := protojson.Unmarshal(data, pc); err != nil {
		return nil, fmt.Errorf("%s: not a JSON ProxyConfig (istio.io/api mesh.v1alpha1): %w", source, err)
	}
	if err := validateProxyConfigFields(pc); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return pc, nil
}

// ParseProxyConfigYAML is ParseProxyConfigJSON for YAML (or JSON) input, as
// used in the proxy.istio.io/config annotation.
func ParseProxyConfigYAML(source string, data []byte) (*meshv1alpha1.ProxyConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", source, err)
	}
	return ParseProxyConfigJSON(source, js)
}

// annotationFields are the ProxyConfig fields (JSON names) a pod's
// proxy.istio.io/config may set: those strait-agent reads (concurrency,
// discoveryAddress, the drain durations, the ports, proxyMetadata) and
// those the injector reads (interceptionMode for the capture step,
// image.imageType for the proxy image, proxyMetadata as the sidecar's
// environment). Istio reads more of it per pod (tracing,
// holdApplicationUntilProxyStarts, proxyStatsMatcher, …), which Strait
// does not: they are refused by name rather than ignored.
var annotationFields = []string{
	"concurrency", "discoveryAddress", "drainDuration", "image", "interceptionMode",
	"proxyAdminPort", "proxyMetadata", "statusPort", "terminationDrainDuration",
}

// CheckAnnotationProxyConfig refuses the fields of a pod's
// proxy.istio.io/config that Strait does not honour per pod, naming each.
func CheckAnnotationProxyConfig(pc *meshv1alpha1.ProxyConfig) error {
	var refused []string
	pc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !slices.Contains(annotationFields, fd.JSONName()) {
			refused = append(refused, fd.JSONName())
		}
		return true
	})
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%s: not supported by Strait yet in %s (per pod it honours %s; set mesh-wide fields in the mesh config's defaultConfig)",
		strings.Join(refused, ", "), AnnotationProxyConfig, strings.Join(annotationFields, ", "))
}

// ParseMeshConfigDefaultConfig returns the defaultConfig of a MeshConfig
// YAML document (the mounted /etc/istio/config/mesh), or nil if it has none.
func ParseMeshConfigDefaultConfig(source string, data []byte) (*meshv1alpha1.ProxyConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", source, err)
	}
	mc := &meshv1alpha1.MeshConfig{}
	// A mesh file carries many MeshConfig fields the agent does not need;
	// unknown ones (from a newer Istio) are not the agent's business.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, mc); err != nil {
		return nil, fmt.Errorf("%s: not a MeshConfig: %w", source, err)
	}
	if mc.GetDefaultConfig() == nil {
		return nil, nil
	}
	if err := validateProxyConfigFields(mc.GetDefaultConfig()); err != nil {
		return nil, fmt.Errorf("%s: defaultConfig: %w", source, err)
	}
	return mc.GetDefaultConfig(), nil
}

// validateProxyConfigFields checks the fields the agent uses, where set.
// It runs on each layer, so an error names the layer that holds the bad
// value, and on the merged result.
func validateProxyConfigFields(pc *meshv1alpha1.ProxyConfig) error {
	if a := pc.GetDiscoveryAddress(); a != "" {
		if err := checkHostPort(a); err != nil {
			return fmt.Errorf("discoveryAddress: %q %w (e.g. \"straitd.istio-system.svc:15010\")", a, err)
		}
	}
	for _, p := range []struct {
		name string
		v    int32
	}{{"proxyAdminPort", pc.GetProxyAdminPort()}, {"statusPort", pc.GetStatusPort()}} {
		if p.v < 0 || p.v > 65535 {
			return fmt.Errorf("%s: %d is not a port (1-65535)", p.name, p.v)
		}
	}
	if c := pc.GetConcurrency(); c != nil && c.GetValue() < 0 {
		return fmt.Errorf("concurrency: %d is negative (0 means one worker per core)", c.GetValue())
	}
	for _, d := range []struct {
		name string
		v    *durationpb.Duration
	}{{"drainDuration", pc.GetDrainDuration()}, {"terminationDrainDuration", pc.GetTerminationDrainDuration()}} {
		if d.v == nil {
			continue
		}
		if err := d.v.CheckValid(); err != nil || d.v.AsDuration() < 0 {
			return fmt.Errorf("%s: %v is not a non-negative duration", d.name, d.v)
		}
	}
	return nil
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("is not host:port")
	}
	if host == "" {
		return fmt.Errorf("has an empty host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("has port %q, want 1-65535", port)
	}
	return nil
}
