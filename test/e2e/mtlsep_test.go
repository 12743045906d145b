package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/netns"
)

// TestAutoMTLSPerEndpoint runs one mesh (file mode, certificates) whose
// namespace strict is STRICT, and checks that auto mTLS is decided per
// endpoint, as Istio's (transport_socket_matches on the cluster, the
// {tlsMode: istio} metadata on EDS endpoints):
//   - a service with a sidecar endpoint and an endpoint without one (a
//     plain app in its own network namespace): a sidecar client reaches
//     both, the sidecar one over mTLS (the app sees an
//     X-Forwarded-Client-Cert with the client's identity), the plain one
//     in plaintext (no X-Forwarded-Client-Cert). Deciding per cluster
//     sent plaintext to both, which the STRICT sidecar refused;
//   - a service with two sidecar endpoints, one of which takes plaintext
//     only on its port (a port-level DISABLE): both are reached, the
//     other one over mTLS.
func TestAutoMTLSPerEndpoint(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "mtlsep", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("web-side", "strict", "10.99.0.11", "side"),
		echoPod("pair-1", "strict", "10.99.0.12", "one"),
		echoPod("pair-2", "strict", "10.99.0.13", "two"),
	}})
	// The plain app: its own network namespace on the pods' bridge, no
	// capture rules, no sidecar. The mesh's network removes it (and kills
	// the app) on Close.
	plain, err := m.Network().AddPod(ctx, "mtlsep-plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Start(ctx, netns.ExecOptions{}, filepath.Join(binDir, "strait-echo"), "--addr", ":8080", "--version", "plain"); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteConfig("plain.yaml", []byte(fmt.Sprintf(
		"apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: plain, namespace: strict}\nspec:\n  address: %s\n  labels: {app: web}\n", plain.IP))); err != nil {
		t.Fatal(err)
	}
	client := m.Pod("client").NewHTTPClient(false)
	const clientID = "URI=spiffe://cluster.local/ns/demo/sa/default"

	// seen sends requests to url until every version of want has
	// answered 200 (or the time runs out) and returns each version's
	// X-Forwarded-Client-Cert; any other answer fails.
	seen := func(t *testing.T, url string, want ...string) map[string]string {
		t.Helper()
		got := map[string]string{}
		failed := errors.New("none") // the last failed request, for the message
		err := poll(ctx, applyTimeout, func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				failed = fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
				return failed
			}
			var rep struct {
				Version string            `json:"version"`
				Headers map[string]string `json:"headers"`
			}
			if err := json.Unmarshal(body, &rep); err != nil {
				return fmt.Errorf("GET %s: %w: %s", url, err, body)
			}
			got[rep.Version] = ""
			for k, v := range rep.Headers {
				if strings.EqualFold(k, "x-forwarded-client-cert") {
					got[rep.Version] = v
				}
			}
			for _, v := range want {
				if _, ok := got[v]; !ok {
					return fmt.Errorf("GET %s: answered by %v so far, want each of %v (last failure: %w)", url, slices.Sorted(maps.Keys(got)), want, failed)
				}
			}
			return nil
		})
		if err != nil {
			dump, derr := m.Pod("client").Admin(ctx, "/stats?filter=strict")
			t.Logf("client sidecar stats (%v):\n%s", derr, dump)
			t.Fatal(err)
		}
		for v := range got {
			if !slices.Contains(want, v) {
				t.Errorf("GET %s: answered by %q, want only %v", url, v, want)
			}
		}
		return got
	}

	t.Run("sidecar and plain endpoints of one service", func(t *testing.T) {
		got := seen(t, "http://240.240.7.1/", "side", "plain")
		if !strings.Contains(got["side"], clientID) {
			t.Errorf("sidecar endpoint: X-Forwarded-Client-Cert %q, want mTLS with the client's %s", got["side"], clientID)
		}
		if got["plain"] != "" {
			t.Errorf("plain endpoint: X-Forwarded-Client-Cert %q, want none (plaintext from the client sidecar)", got["plain"])
		}
		// Every request succeeds, not only one per endpoint.
		for i := 0; i < 20; i++ {
			seen(t, "http://240.240.7.1/", "side", "plain")
		}
	})

	t.Run("port-level DISABLE on one of two sidecar workloads", func(t *testing.T) {
		if err := m.WriteConfig("disable.yaml", []byte("apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: two, namespace: strict}\n"+
			"spec:\n  selector: {matchLabels: {member: two}}\n  mtls: {mode: STRICT}\n  portLevelMtls: {8080: {mode: DISABLE}}\n")); err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		err := poll(ctx, applyTimeout, func() error {
			got = seen(t, "http://240.240.7.2/", "one", "two")
			if got["two"] != "" {
				return fmt.Errorf("pair-2 still sees X-Forwarded-Client-Cert %q: the DISABLE has not applied", got["two"])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got["one"], clientID) {
			t.Errorf("pair-1 (STRICT): X-Forwarded-Client-Cert %q, want mTLS with the client's %s", got["one"], clientID)
		}
		for i := 0; i < 20; i++ {
			got := seen(t, "http://240.240.7.2/", "one", "two")
			if got["two"] != "" {
				t.Fatalf("pair-2 (port-level DISABLE): X-Forwarded-Client-Cert %q, want plaintext", got["two"])
			}
		}
	})
}
