package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestPathNormalization: an AuthorizationPolicy DENY of /admin* on the
// echo server cannot be bypassed by a path the application would
// normalize itself, under each of Istio's pathNormalization settings
// (the mesh config is rewritten between subtests): the examples of
// Istio's "Understand path normalization in authorization policy" are
// denied (403) where the setting normalizes them, or else reach the
// application, which sees the path the sidecars forwarded.
func TestPathNormalization(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	writeMesh := func(t *testing.T, content string) { replaceFile(t, meshFile, content) }
	writeMesh(t, "pathNormalization:\n  normalization: NONE\n")
	m := startMesh(ctx, t, "pathnorm", localmesh.Options{StraitdArgs: []string{"--mesh", meshFile},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "paths", ConfigIP: "10.91.0.10"},
			echoPod("echo", "paths", "10.91.0.11", "v1"),
		}})
	hc := m.Pod("client").HTTPClient()
	// get sends path as written (no dot segment or escape is resolved by
	// the client) and returns the status and the path the echo server saw.
	get := func(path string) (int, string, error) {
		u, err := url.Parse("http://240.240.11.1" + path)
		if err != nil {
			return 0, "", err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return 0, "", err
		}
		req.URL = u
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", fmt.Errorf("GET %s: %w", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, "", err
		}
		var echo struct {
			RawPath string `json:"rawPath"`
		}
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &echo); err != nil {
				return 0, "", fmt.Errorf("GET %s: not the echo server's answer: %q", path, body)
			}
		}
		return resp.StatusCode, echo.RawPath, nil
	}
	// Each case: the path sent, then per mode what comes back: "403"
	// (denied by the policy), "400" (refused by the sidecar), or the
	// path the application saw.
	type want struct{ none, base, merge, decode string }
	cases := []struct {
		path string
		want want
	}{
		{"/public", want{"/public", "/public", "/public", "/public"}},
		{"/admin", want{"403", "403", "403", "403"}},
		{"/public/../admin", want{"/public/../admin", "403", "403", "403"}},
		{"/./admin", want{"/./admin", "403", "403", "403"}},
		{"/admin/.", want{"403", "403", "403", "403"}},
		{"/public/./x/../y", want{"/public/./x/../y", "/public/y", "/public/y", "/public/y"}},
		{"//admin", want{"//admin", "//admin", "403", "403"}},
		{"/public//x", want{"/public//x", "/public//x", "/public/x", "/public/x"}},
		{"/%2Fadmin", want{"/%2Fadmin", "/%2Fadmin", "/%2Fadmin", "403"}},
		{"/public%2F..%2Fadmin", want{"/public%2F..%2Fadmin", "/public%2F..%2Fadmin", "/public%2F..%2Fadmin", "403"}},
		{"/admin%2F..", want{"403", "403", "403", "/"}},
		{"/public%00", want{"", "400", "400", "400"}},
	}
	for _, mode := range []string{"NONE", "BASE", "MERGE_SLASHES", "DECODE_AND_MERGE_SLASHES"} {
		t.Run(mode, func(t *testing.T) {
			writeMesh(t, "pathNormalization:\n  normalization: "+mode+"\n")
			pick := func(w want) string {
				return map[string]string{"NONE": w.none, "BASE": w.base, "MERGE_SLASHES": w.merge, "DECODE_AND_MERGE_SLASHES": w.decode}[mode]
			}
			// The mode applies once the sidecars have the new listeners:
			// wait until a probe that tells it from the previous mode
			// answers as it should (NONE is the mesh's first config).
			probe := map[string]struct{ path, want string }{
				"NONE":                     {"/public/../admin", "/public/../admin"},
				"BASE":                     {"/public/./x/../y", "/public/y"},
				"MERGE_SLASHES":            {"/public//x", "/public/x"},
				"DECODE_AND_MERGE_SLASHES": {"/%2Fadmin", "403"},
			}[mode]
			err := poll(ctx, 30*time.Second, func() error {
				code, path, err := get(probe.path)
				if err != nil {
					return err
				}
				if got := answer(code, path); got != probe.want {
					return fmt.Errorf("%s: %s, want %s", probe.path, got, probe.want)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("mode %s not applied: %v", mode, err)
			}
			for _, c := range cases {
				want := pick(c.want)
				if want == "" {
					continue // not sent: the echo server's own handling
				}
				code, path, err := get(c.path)
				if err != nil {
					t.Errorf("%v", err)
					continue
				}
				if got := answer(code, path); got != want {
					t.Errorf("%s %s: got %s, want %s", mode, c.path, got, want)
				}
			}
		})
	}
}

// answer is a status other than 200 as its number, or the path the echo
// server saw.
func answer(code int, path string) string {
	if code != http.StatusOK {
		return fmt.Sprint(code)
	}
	return path
}
