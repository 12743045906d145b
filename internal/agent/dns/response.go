package dns

import (
	"fmt"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/nds"
)

// DecodeResponse merges the NameTables of an NDS response (Istio sends
// one); a response without resources is an empty table. The agent's xDS
// relay hands it the responses of its NDS subscription on the proxy's
// stream, and NACKs the response when it returns an error.
func DecodeResponse(resp *discovery.DiscoveryResponse) (nds.NameTable, error) {
	if resp.GetTypeUrl() != nds.TypeURL {
		return nil, fmt.Errorf("nds: response of type %q, want %s", resp.GetTypeUrl(), nds.TypeURL)
	}
	out := nds.NameTable{}
	for _, r := range resp.GetResources() {
		if r.GetTypeUrl() != nds.TypeURL {
			return nil, fmt.Errorf("nds: resource of type %q, want %s", r.GetTypeUrl(), nds.TypeURL)
		}
		nt, err := nds.Unmarshal(r.GetValue())
		if err != nil {
			return nil, err
		}
		for h, ni := range nt {
			out[h] = ni
		}
	}
	return out, nil
}
