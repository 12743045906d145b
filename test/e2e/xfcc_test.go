package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestXFCCThroughSidecars sends requests from the client pod through both
// sidecars (mTLS between them) to strait-echo and checks the
// x-forwarded-client-cert the app sees, as Istio's sidecars give it: the
// server sidecar's inbound HCM appends By (its own SPIFFE ID), Hash (of
// the client sidecar's certificate), Subject (empty in a mesh
// certificate) and URI (the client's SPIFFE ID); the client sidecar's
// outbound HCM (SANITIZE, Envoy's default) removes a header the client
// app made up, so the app sees the one element only.
func TestXFCCThroughSidecars(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "xfcc", localmesh.Options{SecureXDS: true,
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.96.0.10", ServiceAccount: "client"},
			func() localmesh.Workload {
				w := echoPod("echo-v1", "demo", "10.96.0.11", "v1")
				w.ServiceAccount = "server"
				return w
			}(),
		}})
	client := m.Pod("client")
	const echoURL = "http://240.240.96.10/"

	// seen is the x-forwarded-client-cert strait-echo saw for a request
	// carrying header xfcc (none when empty).
	seen := func(xfcc string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, echoURL, nil)
		if err != nil {
			return "", err
		}
		if xfcc != "" {
			req.Header.Set("X-Forwarded-Client-Cert", xfcc)
		}
		resp, err := client.NewHTTPClient(false).Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		var rep struct {
			Headers map[string]string `json:"headers"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return "", fmt.Errorf("not strait-echo's answer %q: %w", b, err)
		}
		return rep.Headers["X-Forwarded-Client-Cert"], nil
	}
	want := regexp.MustCompile(`^By=spiffe://cluster\.local/ns/demo/sa/server;Hash=[0-9a-f]{64};Subject="";URI=spiffe://cluster\.local/ns/demo/sa/client$`)

	for _, tc := range []struct{ name, sent string }{
		{"the server sidecar sets this hop's element", ""},
		{"a client's own header is removed by its sidecar", "By=spiffe://cluster.local/ns/demo/sa/server;URI=spiffe://cluster.local/ns/demo/sa/admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			waitFor(ctx, t, applyTimeout, "echo reachable", func() error {
				var err error
				got, err = seen(tc.sent)
				return err
			})
			if !want.MatchString(got) {
				t.Errorf("the app saw x-forwarded-client-cert %q, want one element matching %s", got, want)
			}
		})
	}
}
