package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/debugapi"
)

func runCtl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestTokenCreate(t *testing.T) {
	dir := t.TempDir()
	if _, err := runCtl(t, "token", "create", "--namespace", "demo", "--service-account", "client", "--ca-dir", dir); err == nil || !strings.Contains(err.Error(), "start straitd with --ca-dir") {
		t.Fatalf("without a key: %v", err)
	}
	key, err := token.LoadOrCreateKey(filepath.Join(dir, token.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCtl(t, "token", "create", "--namespace", "demo", "--service-account", "client", "--ca-dir", dir, "--ttl", "1h")
	if err != nil {
		t.Fatal(err)
	}
	c, err := key.Verify(strings.TrimSpace(out), time.Now())
	if err != nil || c.Namespace != "demo" || c.ServiceAccount != "client" {
		t.Fatalf("issued token: %+v %v", c, err)
	}
	if _, err := key.Verify(strings.TrimSpace(out), time.Now().Add(61*time.Minute)); err == nil {
		t.Error("--ttl 1h token valid after 61 minutes")
	}
	file := filepath.Join(t.TempDir(), "var/run/secrets/tokens/istio-token")
	if _, err := runCtl(t, "token", "create", "--namespace", "demo", "--service-account", "client", "--ca-dir", dir, "-o", file); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	for _, bad := range [][]string{
		{"--namespace", "demo"},
		{"--namespace", "de/mo", "--service-account", "a"},
		{"--namespace", "demo", "--service-account", "a", "--ttl", "-1h"},
	} {
		if _, err := runCtl(t, append([]string{"token", "create", "--ca-dir", dir}, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestProxyConfigSecret(t *testing.T) {
	nb := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	dump := debugapi.SecretsDump{Secrets: []debugapi.SecretInfo{
		{Name: "default", Type: "Cert Chain", Version: "3", Certs: []debugapi.CertInfo{{SerialNumber: "abc1", NotBefore: nb, NotAfter: nb.Add(24 * time.Hour), SPIFFEIDs: []string{"spiffe://cluster.local/ns/demo/sa/client"}, SHA256: "ff"}}},
		{Name: "ROOTCA", Type: "CA", Version: "3", Certs: []debugapi.CertInfo{
			{SerialNumber: "1", NotBefore: nb, NotAfter: nb.Add(time.Hour), SHA256: "0a0b"},
			{SerialNumber: "2", NotBefore: nb, NotAfter: nb.Add(48 * time.Hour), SHA256: "0c0d"},
		}},
	}}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/secrets" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(dump)
	}))
	defer agent.Close()
	host := strings.TrimPrefix(agent.URL, "http://")
	out, err := runCtl(t, "proxy-config", "secret", "client-1", "--agent-addr", host)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "RESOURCE NAME") {
		t.Fatalf("output:\n%s", out)
	}
	for i, want := range []string{"default", "spiffe://cluster.local/ns/demo/sa/client", "abc1", "2026-12-02T12:00:00Z"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("default row lacks %q (%d): %s", want, i, lines[1])
		}
	}
	if !strings.Contains(lines[2], "sha256:0a0b") || !strings.Contains(lines[3], "sha256:0c0d") || !strings.Contains(lines[3], "ROOTCA") {
		t.Errorf("root rows:\n%s\n%s", lines[2], lines[3])
	}
	if !strings.Contains(lines[2], "false") && time.Now().After(nb.Add(time.Hour)) {
		t.Errorf("expired root shown valid: %s", lines[2])
	}
	jsonOut, err := runCtl(t, "proxy-config", "secret", "client-1", "--agent-addr", host, "-o", "json")
	if err != nil || !strings.Contains(jsonOut, `"serial_number":"abc1"`) {
		t.Fatalf("json: %v %s", err, jsonOut)
	}

	// The pod's address comes from straitd's syncz.
	syncz := []debugapi.SyncStatus{
		{ProxyID: "sidecar~10.1.0.2~client-1.demo~demo.svc.cluster.local"},
		{ProxyID: "sidecar~10.1.0.3~echo-1.demo~demo.svc.cluster.local"},
		{ProxyID: "sidecar~10.1.0.4~echo-1.prod~prod.svc.cluster.local"},
	}
	straitd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(syncz) }))
	defer straitd.Close()
	ctx := context.Background()
	for pod, want := range map[string]string{"client-1": "10.1.0.2", "client-1.demo": "10.1.0.2", "echo-1.prod": "10.1.0.4"} {
		if ip, err := resolvePodIP(ctx, straitdFlags{addr: straitd.URL}, pod); err != nil || ip != want {
			t.Errorf("%s: %s %v, want %s", pod, ip, err, want)
		}
	}
	if _, err := resolvePodIP(ctx, straitdFlags{addr: straitd.URL}, "echo-1"); err == nil || !strings.Contains(err.Error(), "give POD.NAMESPACE") {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := resolvePodIP(ctx, straitdFlags{addr: straitd.URL}, "nope"); err == nil || !strings.Contains(err.Error(), "client-1.demo") {
		t.Errorf("unknown: %v", err)
	}
}
