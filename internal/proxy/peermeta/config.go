package peermeta

import (
	"fmt"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	xdsv3 "github.com/cncf/xds/go/xds/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// FilterName is the name Istio gives the exchange's network filter, on an
// inbound chain (listener filter) and on an outbound cluster (upstream
// filter), and its HTTP filter.
const FilterName = "istio.metadata_exchange"

// NetworkTypeURL is the network filter's config type, which Istio writes
// in a TypedStruct (pilot/pkg/xds/filters TCPListenerMx, TCPClusterMx).
const NetworkTypeURL = "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange"

// TypedStruct unwraps a TypedStruct (udpa.type.v1 or xds.type.v3): its
// type URL and value.
func TypedStruct(a *anypb.Any) (typeURL string, value *structpb.Struct, err error) {
	var ts1 udpav1.TypedStruct
	var ts3 xdsv3.TypedStruct
	switch {
	case a.MessageIs(&ts1):
		if err := a.UnmarshalTo(&ts1); err != nil {
			return "", nil, err
		}
		return ts1.GetTypeUrl(), ts1.GetValue(), nil
	case a.MessageIs(&ts3):
		if err := a.UnmarshalTo(&ts3); err != nil {
			return "", nil, err
		}
		return ts3.GetTypeUrl(), ts3.GetValue(), nil
	}
	return "", nil, fmt.Errorf("typed_config %s is not a TypedStruct", a.GetTypeUrl())
}

// ParseNetworkConfig checks the network filter's typed_config: protocol
// must be istio-peer-exchange (the ALPN the exchange is keyed on);
// enable_discovery is accepted (Strait has no workload discovery, so it
// finds no peer, as Envoy's does for an unknown address); anything else is
// refused by name.
func ParseNetworkConfig(a *anypb.Any) error {
	typeURL, value, err := TypedStruct(a)
	if err != nil {
		return fmt.Errorf("%s: %w", FilterName, err)
	}
	if typeURL != NetworkTypeURL {
		return fmt.Errorf("%s: TypedStruct type_url %q, want %q", FilterName, typeURL, NetworkTypeURL)
	}
	for k, v := range value.GetFields() {
		switch k {
		case "protocol":
			if p := v.GetStringValue(); p != ALPN {
				return fmt.Errorf("%s: protocol %q is not supported (want %s)", FilterName, p, ALPN)
			}
		case "enable_discovery":
		case "additional_labels":
			if len(v.GetListValue().GetValues()) > 0 {
				return fmt.Errorf("%s: additional_labels is not supported", FilterName)
			}
		default:
			return fmt.Errorf("%s: field %s is not supported", FilterName, k)
		}
	}
	if _, ok := value.GetFields()["protocol"]; !ok {
		return fmt.Errorf("%s: protocol is required (want %s)", FilterName, ALPN)
	}
	return nil
}
