package debugserve

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/freeport"
)

// env is a fake environment for FromEnv.
type env map[string]string

func (e env) get(name string) string { return e[name] }

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

// keepMemProfileRate restores runtime.MemProfileRate after a test that
// sets it, and sets it to rate for the test.
func keepMemProfileRate(t *testing.T, rate int) {
	t.Helper()
	old := runtime.MemProfileRate
	runtime.MemProfileRate = rate
	t.Cleanup(func() { runtime.MemProfileRate = old })
}

func TestFromEnvUnsetTurnsHeapProfilingOff(t *testing.T) {
	keepMemProfileRate(t, 512*1024)
	var asked string
	stop, err := FromEnv(func(name string) string { asked = name; return "" }, "X_DEBUG_ADDR", nil)
	if err != nil {
		t.Fatal(err)
	}
	if asked != "X_DEBUG_ADDR" {
		t.Errorf("FromEnv read %q, want X_DEBUG_ADDR", asked)
	}
	if runtime.MemProfileRate != 0 {
		t.Errorf("MemProfileRate = %d with no debug address, want 0", runtime.MemProfileRate)
	}
	stop() // nothing to stop
}

func TestFromEnvServesAndKeepsHeapProfiling(t *testing.T) {
	keepMemProfileRate(t, 4096) // as GODEBUG=memprofilerate=4096 would set it
	port, err := freeport.Port("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	stop, err := FromEnv(env{"X_DEBUG_ADDR": addr}.get, "X_DEBUG_ADDR", nil)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.MemProfileRate != 4096 {
		t.Errorf("MemProfileRate = %d with a debug address, want the 4096 it had", runtime.MemProfileRate)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Errorf("heap profile: %s %.200s", resp.Status, body)
	}
	stop()
	if resp, err := http.Get("http://" + addr + "/debug/runtime"); err == nil {
		resp.Body.Close()
		t.Errorf("the debug server still answers after stop: %s", resp.Status)
	}
}

func TestFromEnvRefusesNonLoopbackNamingTheVariable(t *testing.T) {
	keepMemProfileRate(t, 4096)
	stop, err := FromEnv(env{"X_DEBUG_ADDR": "0.0.0.0:0"}.get, "X_DEBUG_ADDR", nil)
	if err == nil {
		stop()
		t.Fatal("FromEnv served on 0.0.0.0")
	}
	if !strings.HasPrefix(err.Error(), "X_DEBUG_ADDR: ") {
		t.Errorf("error %q does not name the variable", err)
	}
}

// get fetches path from the server at base and returns the response's
// Content-Type and body.
func get(t *testing.T, base, path string) (string, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	return resp.Header.Get("Content-Type"), string(body)
}

// Profiles are pprof's protobuf unless ?debug=N asks for text; ?gc=1
// collects first, for the heap profile only; /debug/runtime has the
// float64 metrics as well as the uint64 ones.
func TestProfileFormatsAndGC(t *testing.T) {
	lis, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Start(lis, nil)
	defer s.Close()
	base := "http://" + lis.Addr().String()
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // only forced collections count below

	if ct, _ := get(t, base, "/debug/pprof/goroutine"); ct != "application/octet-stream" {
		t.Errorf("goroutine profile Content-Type %q, want application/octet-stream", ct)
	}
	if ct, body := get(t, base, "/debug/pprof/goroutine?debug=1"); ct != "text/plain; charset=utf-8" || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine ?debug=1: Content-Type %q, body %.80q", ct, body)
	}

	cycles := func() float64 { return RuntimeMetrics()["/gc/cycles/forced:gc-cycles"] }
	for _, c := range []struct {
		path string
		gc   bool
	}{
		{"/debug/pprof/heap?gc=1", true},
		{"/debug/pprof/heap", false},
		{"/debug/pprof/goroutine?gc=1", false},
	} {
		before := cycles()
		get(t, base, c.path)
		if got := cycles() > before; got != c.gc {
			t.Errorf("GET %s collected: %v, want %v", c.path, got, c.gc)
		}
	}

	if m := RuntimeMetrics(); m["/cpu/classes/total:cpu-seconds"] <= 0 {
		t.Errorf("/cpu/classes/total:cpu-seconds (a float64 metric) = %v, want > 0", m["/cpu/classes/total:cpu-seconds"])
	}
}
