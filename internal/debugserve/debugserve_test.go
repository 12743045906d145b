package debugserve

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "localhost:0", "10.0.0.1:0", "nonsense"} {
		if lis, err := Listen(addr); err == nil {
			lis.Close()
			t.Errorf("Listen(%q) = nil error, want a refusal", addr)
		}
	}
}

func TestServesRuntimeAndHeapProfile(t *testing.T) {
	lis, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Start(lis, nil)
	defer s.Close()
	base := "http://" + lis.Addr().String()

	resp, err := http.Get(base + "/debug/runtime")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if m["/sched/goroutines:goroutines"] < 1 || m["/memory/classes/total:bytes"] <= 0 {
		t.Errorf("runtime metrics lack goroutines or total memory: %v", m)
	}

	resp, err = http.Get(base + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Errorf("heap profile: %s %.200s", resp.Status, body)
	}
}

func TestUnknownProfile(t *testing.T) {
	lis, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Start(lis, nil)
	defer s.Close()
	resp, err := http.Get("http://" + lis.Addr().String() + "/debug/pprof/nonesuch")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown profile: %s, want 404", resp.Status)
	}
}
