package listener

import (
	"encoding/json"
	"os"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// TestJWTInboundAccepted: strait-proxy builds the listeners straitd
// generates for workloads that RequestAuthentications select (the jwt
// golden files: jwt_authn first on the inbound HTTP chains, every jwtRule
// option set).
func TestJWTInboundAccepted(t *testing.T) {
	for _, pod := range []string{"web", "client"} {
		raw, err := os.ReadFile("../../xds/gen/testdata/jwt/golden/" + pod + ".listeners.json")
		if err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		if err := json.Unmarshal(raw, &docs); err != nil {
			t.Fatal(err)
		}
		prov := tlsconf.NewProvider(tlsconf.ProviderOptions{})
		defer prov.Close()
		found := false
		for _, d := range docs {
			var l listenerv3.Listener
			if err := protojson.Unmarshal(d, &l); err != nil {
				t.Fatal(err)
			}
			if _, err := Build(&l, Deps{Stats: stats.New(), Secrets: prov}); err != nil {
				t.Fatalf("%s: strait-proxy refuses what straitd generates: %v", pod, err)
			}
			found = found || l.Name == "virtualInbound"
		}
		if !found {
			t.Errorf("%s: no virtualInbound", pod)
		}
	}
}
