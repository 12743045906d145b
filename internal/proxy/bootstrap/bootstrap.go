// Package bootstrap reads an Envoy v3 bootstrap (JSON or YAML), refuses by
// name the fields strait-proxy does not implement (checkFields), and
// extracts the parts it acts on: node, admin address, static resources and
// the ADS config source.
package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/proxy/pgv"
)

// DefaultAdminAddress is used when the bootstrap has no admin address.
const DefaultAdminAddress = "127.0.0.1:15000"

// Load reads and parses the bootstrap file at path.
func Load(path string) (*bootstrapv3.Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read bootstrap: %w", err)
	}
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", path, err)
	}
	return b, nil
}

// Parse parses a bootstrap in JSON or YAML and validates it.
func Parse(data []byte) (*bootstrapv3.Bootstrap, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, b); err != nil {
		return nil, fmt.Errorf("not an envoy.config.bootstrap.v3.Bootstrap: %w", err)
	}
	if err := pgv.ValidateAll(b); err != nil {
		return nil, fmt.Errorf("invalid: %w", err)
	}
	if err := checkFields(b); err != nil {
		return nil, err
	}
	if ads := b.GetDynamicResources().GetAdsConfig(); ads != nil {
		if _, err := ADSCluster(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// AdminAddress returns host:port of the admin listener.
func AdminAddress(b *bootstrapv3.Bootstrap) (string, error) {
	a := b.GetAdmin().GetAddress()
	if a == nil {
		return DefaultAdminAddress, nil
	}
	sa := a.GetSocketAddress()
	if sa == nil {
		return "", errors.New("admin.address: only socket_address is supported")
	}
	return net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))), nil
}

// ADSCluster returns the static cluster named by
// dynamic_resources.ads_config.grpc_services[0].envoy_grpc.cluster_name, or
// nil when the bootstrap has no ADS.
func ADSCluster(b *bootstrapv3.Bootstrap) (*clusterv3.Cluster, error) {
	ads := b.GetDynamicResources().GetAdsConfig()
	if ads == nil {
		return nil, nil
	}
	if ads.GetApiType() != corev3.ApiConfigSource_GRPC && ads.GetApiType() != corev3.ApiConfigSource_AGGREGATED_GRPC {
		return nil, fmt.Errorf("dynamic_resources.ads_config.api_type %s is not supported (want GRPC)", ads.GetApiType())
	}
	if len(ads.GetGrpcServices()) == 0 || ads.GetGrpcServices()[0].GetEnvoyGrpc() == nil {
		return nil, errors.New("dynamic_resources.ads_config.grpc_services[0].envoy_grpc is required")
	}
	name := ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			if len(c.GetLoadAssignment().GetEndpoints()) == 0 ||
				len(c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()) == 0 {
				return nil, fmt.Errorf("ads cluster %q has no load_assignment endpoint", name)
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("dynamic_resources.ads_config names cluster %q, which is not in static_resources.clusters", name)
}

// EndpointAddress converts an endpoint address to a (network, address) pair
// suitable for net.Dial: ("tcp", "ip:port") or ("unix", path).
func EndpointAddress(a *corev3.Address) (network, address string, err error) {
	switch {
	case a.GetSocketAddress() != nil:
		sa := a.GetSocketAddress()
		if sa.GetProtocol() != corev3.SocketAddress_TCP {
			return "", "", fmt.Errorf("socket_address protocol %s is not supported", sa.GetProtocol())
		}
		return "tcp", net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))), nil
	case a.GetPipe() != nil:
		return "unix", a.GetPipe().GetPath(), nil
	default:
		return "", "", errors.New("address: only socket_address and pipe are supported")
	}
}
