package route

import (
	"fmt"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// direct_response.status is 200 to 599, both ends included (Envoy's
// DirectResponseAction validation: gte 200, lt 600).
func TestDirectResponseStatusRange(t *testing.T) {
	for status, ok := range map[uint32]bool{199: false, 200: true, 404: true, 599: true, 600: false, 0: false} {
		_, err := compileOne(&routev3.VirtualHost{Routes: []*routev3.Route{{
			Match:  prefix("/"),
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: status}},
		}}})
		switch {
		case ok && err != nil:
			t.Errorf("status %d: %v", status, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("direct_response.status %d is out of range", status))):
			t.Errorf("status %d: error %v, want one naming direct_response.status", status, err)
		}
	}
}
