package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProxyStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/syncz" {
			http.NotFound(w, r)
			return
		}
		// straitd lists connections by node id, so by IP; the rows are by
		// name.
		_, _ = w.Write([]byte(`[{"proxy_id":"sidecar~10.0.0.1~b.demo~demo.svc.cluster.local","connection_id":"c-2","types":[
			{"type":"cds","sent":"1","acked":"1","synced":true}]},
			{"proxy_id":"sidecar~10.0.0.2~a.demo~demo.svc.cluster.local","connection_id":"c-1","types":[
			{"type":"cds","sent":"3","acked":"3","synced":true},
			{"type":"eds","sent":"4","acked":"3","synced":false},
			{"type":"lds","sent":"","acked":"","synced":false},
			{"type":"rds","sent":"5","acked":"2","synced":false,"last_nack":"bad route"}]},
			{"proxy_id":"not-a-node-id","connection_id":"c-3","types":[]}]`))
	}))
	defer srv.Close()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"proxy-status", "--straitd-addr", strings.TrimPrefix(srv.URL, "http://")})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("output:\n%s", out.String())
	}
	// NAME is POD.NAMESPACE, what proxy-config takes, as istioctl shows
	// it; an id that is not a node id is shown whole.
	for i, want := range [][]string{
		{"a.demo", "SYNCED", "NOT_SENT", "STALE", "STALE", "(NACK:", "bad", "route)", "c-1"},
		{"b.demo", "SYNCED", "-", "-", "-", "c-2"},
		{"not-a-node-id", "-", "-", "-", "-", "c-3"},
	} {
		f := strings.Fields(strings.ReplaceAll(lines[i+1], "NOT SENT", "NOT_SENT"))
		if strings.Join(f, " ") != strings.Join(want, " ") {
			t.Errorf("row %d = %q, want %q", i+1, f, want)
		}
	}

	cmd = newRootCmd()
	cmd.SetArgs([]string{"proxy-status", "--straitd-addr", "127.0.0.1:1"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "is straitd running") {
		t.Fatalf("unreachable straitd: %v", err)
	}
}
