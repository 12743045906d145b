package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestDrainRetry runs, on the demo mesh, the proxy behaviours of the
// drainretry work that a sidecar shows: /config_dump's include_eds and
// last_updated, and a request retried by Istio's default policy staying
// on the client's keep-alive connection.
func TestDrainRetry(t *testing.T) {
	m := startDemoMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := m.Pod("client")

	t.Run("config_dump: endpoints only with include_eds, last_updated on every entry", func(t *testing.T) {
		type entry struct {
			LastUpdated string `json:"lastUpdated"`
		}
		var doc struct {
			Configs []struct {
				Type                  string  `json:"@type"`
				StaticClusters        []entry `json:"staticClusters"`
				DynamicActiveClusters []entry `json:"dynamicActiveClusters"`
				DynamicListeners      []struct {
					ActiveState entry `json:"activeState"`
				} `json:"dynamicListeners"`
				DynamicRouteConfigs    []entry           `json:"dynamicRouteConfigs"`
				DynamicEndpointConfigs []json.RawMessage `json:"dynamicEndpointConfigs"`
			} `json:"configs"`
		}
		plain, err := client.Admin(ctx, "/config_dump")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(plain), "EndpointsConfigDump") {
			t.Error("/config_dump without include_eds holds an EndpointsConfigDump")
		}
		withEDS, err := client.Admin(ctx, "/config_dump?include_eds")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(withEDS, &doc); err != nil {
			t.Fatal(err)
		}
		var endpoints, stamped, unstamped int
		check := func(e entry) {
			if _, err := time.Parse(time.RFC3339Nano, e.LastUpdated); err != nil {
				unstamped++
				return
			}
			stamped++
		}
		for _, c := range doc.Configs {
			endpoints += len(c.DynamicEndpointConfigs)
			for _, e := range c.StaticClusters {
				check(e)
			}
			for _, e := range c.DynamicActiveClusters {
				check(e)
			}
			for _, l := range c.DynamicListeners {
				check(l.ActiveState)
			}
			for _, e := range c.DynamicRouteConfigs {
				check(e)
			}
		}
		if endpoints == 0 || !strings.Contains(string(withEDS), `"outbound|80||`+localmesh.DemoHost+`"`) {
			t.Errorf("/config_dump?include_eds: %d dynamic endpoint configs, want the demo service's", endpoints)
		}
		if unstamped > 0 || stamped == 0 {
			t.Errorf("%d entries without last_updated, %d with; want every one stamped", unstamped, stamped)
		}
	})

	t.Run("a retried 503 keeps the client's keep-alive connection", func(t *testing.T) {
		hc := client.NewHTTPClient(true)
		defer hc.CloseIdleConnections()
		hc.Timeout = 10 * time.Second
		reused := make([]bool, 0, 3)
		for i := range 3 {
			var info httptrace.GotConnInfo
			rctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { info = c }})
			req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+localmesh.DemoVIP+"/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			k := fmt.Sprintf("drainretry-%d-%d", i, time.Now().UnixNano())
			req.Header.Set("X-Echo-Key", k)
			req.Header.Set("X-Echo-Fail", "1") // Istio's default policy retries the first 503
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Close {
				t.Fatalf("request %d: %d close=%v (%s), want 200 after the retry, keep-alive", i, resp.StatusCode, resp.Close, body)
			}
			// The retry may go to the other pod: the attempt count the
			// answering app saw says it was a retry.
			var rep echoReply
			if err := json.Unmarshal(body, &rep); err != nil {
				t.Fatalf("request %d: %v: %s", i, err, body)
			}
			if got := rep.Headers["X-Envoy-Attempt-Count"]; got != "2" {
				t.Errorf("request %d: the app saw x-envoy-attempt-count %q, want 2 (a retried 503)", i, got)
			}
			reused = append(reused, info.Reused)
		}
		if !reused[1] || !reused[2] {
			t.Errorf("connection reused per request %v: a retry closed the client's connection", reused)
		}
	})
}
