package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// syncBuffer is a bytes.Buffer safe for a process writing and a test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// upState is the part of local up's state file the test reads.
type upState struct {
	PID     int    `json:"pid"`
	WorkDir string `json:"workDir"`
	Bridge  string `json:"bridge"`
	Pods    []struct {
		Name  string `json:"name"`
		Netns string `json:"netns"`
	} `json:"pods"`
}

// TestLocalUp runs the real `straitctl local up` on testdata/localup
// (client, echo v1 and v2 at fixed addresses, a VirtualService 80/20, STRICT
// mTLS), sends requests with `straitctl local exec`, edits the
// VirtualService live, and checks that SIGTERM removes every namespace,
// the bridge, every process, the work dir and the state file.
func TestLocalUp(t *testing.T) {
	requireMesh(t)
	straitctl := filepath.Join(binDir, "straitctl")
	if _, err := os.Stat(straitctl); err != nil {
		testreq.Missing(t, "no straitctl in %s: build ./cmd/... into STRAIT_BIN_DIR", binDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "testdata", "localup")
	cfg := t.TempDir()
	for _, f := range []string{"mesh.yaml", "virtualservice.yaml", "peerauthentication.yaml"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	ctl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, straitctl, args...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	var out syncBuffer
	upArgs := []string{"local", "up", "--config-dir", cfg, "--bin-dir", binDir, "--state-dir", stateDir}
	_, promErr := exec.LookPath("prometheus")
	var promURL string // the Prometheus of --prometheus, once seen
	if promErr == nil {
		upArgs = append(upArgs, "--prometheus")
	}
	up := exec.Command(straitctl, upArgs...)
	up.Stdout, up.Stderr = &out, &out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = up.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-upDone:
				_ = err // the exit status of a SIGTERM
			case <-time.After(30 * time.Second):
				_ = up.Process.Kill()
			}
		}
		if t.Failed() {
			t.Logf("--- local up ---\n%s", tail(out.String(), 60))
		}
	})
	waitFor(ctx, t, 90*time.Second, "local up ready", func() error {
		select {
		case err := <-upDone:
			stopped = true
			return fmt.Errorf("%w: local up exited: %w", errGiveUp, err)
		default:
		}
		if !strings.Contains(out.String(), "Ctrl-C removes the mesh") {
			return errors.New("not ready yet")
		}
		return nil
	})
	// The mesh page's URL, and the page behind it (TestMeshPage reads it).
	if u := regexp.MustCompile(`http://127\.0\.0\.1:\d+/debug/mesh`).FindString(out.String()); u == "" {
		t.Errorf("local up does not print the mesh page's URL")
	} else if page, err := getPage(ctx, u); err != nil || !bytes.Contains(page, []byte(`<svg`)) {
		t.Errorf("mesh page %s: %v %.200s", u, err, page)
	}
	if strings.Contains(out.String(), "lack the label") {
		t.Errorf("local up says WorkloadEntries lack the tlsMode label; every one of testdata/localup has it")
	}
	for _, row := range [][]string{
		{"client", "localup", "10.213.77.10", "app=client,security.istio.io/tlsMode=istio", "-", "ready"},
		{"echo-v1", "localup", "10.213.77.11", "app=echo,security.istio.io/tlsMode=istio,version=v1", "8080,9090", "ready"},
		{"echo-v2", "localup", "10.213.77.12", "app=echo,security.istio.io/tlsMode=istio,version=v2", "8080,9090", "ready"},
		{"tool", "localup", "10.213.77.20", "app=tool,security.istio.io/tlsMode=istio", "9000", "ready"},
	} {
		if !containsRow(out.String(), row) {
			t.Errorf("local up's table lacks the row %v", row)
		}
	}
	data, err := os.ReadFile(filepath.Join(stateDir, "state.json"))
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	var st upState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if st.PID != up.Process.Pid || st.Bridge == "" || len(st.Pods) != 4 || st.WorkDir == "" {
		t.Fatalf("state %+v (local up is pid %d)", st, up.Process.Pid)
	}

	// getURL sends n requests from the client pod and tallies the
	// versions; get sends them by the service's name (which exec
	// resolves to its VIP).
	var getURL func(url string, n int) (map[string]int, []echoGet, error)
	get := func(n int) (map[string]int, []echoGet, error) {
		return getURL("http://echo.localup.svc.cluster.local/", n)
	}
	getURL = func(url string, n int) (map[string]int, []echoGet, error) {
		o, err := ctl("local", "exec", "client", "-n", "localup", "--state-dir", stateDir, "--",
			"strait-echo", "get", "-n", fmt.Sprint(n), url)
		if err != nil {
			return nil, nil, fmt.Errorf("local exec: %w: %s", err, o)
		}
		counts := map[string]int{}
		var replies []echoGet
		sc := bufio.NewScanner(strings.NewReader(o))
		for sc.Scan() {
			var g echoGet
			if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
				return nil, nil, fmt.Errorf("line %q: %w", sc.Text(), err)
			}
			if g.Status != 200 || g.Reply == nil {
				return nil, nil, fmt.Errorf("request failed: %s", sc.Text())
			}
			counts[g.Reply.Version]++
			replies = append(replies, g)
		}
		if len(replies) != n {
			return nil, nil, fmt.Errorf("%d answers, want %d: %s", len(replies), n, o)
		}
		return counts, replies, nil
	}

	t.Run("split", func(t *testing.T) {
		const n = 200
		counts, replies, err := get(n)
		if err != nil {
			t.Fatal(err)
		}
		if v1 := 100 * float64(counts["v1"]) / n; math.Abs(v1-80) > 12 || counts["v1"]+counts["v2"] != n {
			t.Errorf("split %v of %d, want about 80/20", counts, n)
		}
		for _, r := range replies[:5] {
			// Inbound through the server's sidecar (REDIRECT: the app
			// sees the sidecar's 127.0.0.6), outbound through the
			// client's (it adds x-request-id).
			if !strings.HasPrefix(r.Reply.Remote, "127.0.0.6:") || r.Reply.Headers["X-Request-Id"] == "" {
				t.Errorf("reply %+v: want the server sidecar's 127.0.0.6 as remote and the client sidecar's X-Request-Id", *r.Reply)
			}
			if want := "echo-" + r.Reply.Version; r.Reply.Pod != want {
				t.Errorf("version %s answered by pod %q, want %s", r.Reply.Version, r.Reply.Pod, want)
			}
		}
	})

	t.Run("second target port and annotated app", func(t *testing.T) {
		// strait-echo listens on both target ports of the ServiceEntry.
		counts, _, err := getURL("http://echo.localup.svc.cluster.local:9090/", 10)
		if err != nil {
			t.Fatal(err)
		}
		if counts["v1"]+counts["v2"] != 10 {
			t.Errorf("port 9090 answered by %v, want echo v1/v2", counts)
		}
		// The tool pod runs the command of its annotation.
		counts, replies, err := getURL("http://tool.localup.svc.cluster.local/", 3)
		if err != nil {
			t.Fatal(err)
		}
		if counts["custom"] != 3 || replies[0].Reply.Pod != "tool" {
			t.Errorf("tool pod answered %v (pod %q), want version custom from pod tool", counts, replies[0].Reply.Pod)
		}
	})

	t.Run("scrape targets", func(t *testing.T) {
		// local up names each pod's merged metrics; from the host, echo-v1's
		// hold its proxy's istio_requests_total and, since its WorkloadEntry
		// says prometheus.io/port 9102, its app's own metrics after them.
		url := "http://10.213.77.11:15020/stats/prometheus"
		if !strings.Contains(out.String(), "echo-v1: "+url) || !strings.Contains(out.String(), "straitd: http://") {
			t.Errorf("local up does not print the scrape targets")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text := string(body)
		proxyAt, appAt := strings.Index(text, "istio_requests_total{"), strings.Index(text, `strait_echo_requests_total{code="200"}`)
		if resp.StatusCode != http.StatusOK || proxyAt < 0 || appAt < proxyAt {
			t.Errorf("%s: %s; want istio_requests_total, then the app's strait_echo_requests_total (at %d, %d)", url, resp.Status, proxyAt, appAt)
		}
		// The WorkloadEntries' labels reach each agent (ISTIO_METAJSON_LABELS)
		// and so the peer labels on both sides of a request.
		labelled := false
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "istio_requests_total{") && strings.Contains(l, `reporter="destination"`) &&
				strings.Contains(l, `source_app="client"`) && strings.Contains(l, `destination_app="echo"`) && strings.Contains(l, `destination_version="v1"`) {
				labelled = true
			}
		}
		if !labelled {
			t.Errorf("echo-v1 has no istio_requests_total line with source_app client and destination_app echo, version v1:\n%s", grepLines(text, "istio_requests_total{"))
		}
		if promErr != nil {
			t.Log("no prometheus binary: --prometheus not tried")
			return
		}
		// --prometheus: the Prometheus local up started scrapes the four
		// sidecars and straitd.
		_, after, ok := strings.Cut(out.String(), "Prometheus scraping them every 5s: ")
		promURL, _, _ = strings.Cut(after, " ")
		if !ok || !strings.HasPrefix(promURL, "http://127.0.0.1:") {
			t.Fatalf("local up --prometheus does not say where its Prometheus is")
		}
		waitFor(ctx, t, 60*time.Second, "Prometheus scraping the mesh", func() error {
			resp, err := http.Get(promURL + "/api/v1/query?query=sum(up)")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var r struct {
				Data struct {
					Result []struct {
						Value [2]any `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
				return err
			}
			if len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "5" {
				return fmt.Errorf("sum(up) = %v, want 5 (four sidecars and straitd)", r.Data.Result)
			}
			return nil
		})
	})

	t.Run("exec exit status and refusals", func(t *testing.T) {
		o, err := ctl("local", "exec", "client", "--state-dir", stateDir, "--", "sh", "-c", "exit 7")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Errorf("exec of exit 7: %v %s, want exit status 7", err, o)
		}
		if o, err := ctl("local", "exec", "nosuch", "--state-dir", stateDir, "--", "true"); err == nil || !strings.Contains(o, "no pod nosuch") {
			t.Errorf("exec in a missing pod: %v %s", err, o)
		}
		o, err = ctl("local", "up", "--config-dir", cfg, "--bin-dir", binDir, "--state-dir", stateDir)
		if err == nil || !strings.Contains(o, fmt.Sprintf("a local mesh is already running (pid %d", up.Process.Pid)) {
			t.Errorf("second local up: %v %s, want a refusal", err, o)
		}
		// Another state dir, the same addresses: the subnet is taken.
		other := filepath.Join(t.TempDir(), "state")
		o, err = ctl("local", "up", "--config-dir", cfg, "--bin-dir", binDir, "--state-dir", other)
		if err == nil || !strings.Contains(o, "already routes 10.213.77.0/24") {
			t.Errorf("local up on a subnet in use: %v %s, want a refusal naming it", err, o)
		}
		if _, err := os.Stat(filepath.Join(other, "lock")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused local up left its lock: %v", err)
		}
	})

	t.Run("status", func(t *testing.T) {
		waitEvery(ctx, t, 30*time.Second, time.Second, "every sidecar SYNCED in local status", func() error {
			o, err := ctl("local", "status", "--state-dir", stateDir)
			if err != nil {
				return fmt.Errorf("%w: %s", err, o)
			}
			for _, p := range []string{"client", "echo-v1", "echo-v2", "tool"} {
				if !containsRow(o, []string{p + ".localup", "SYNCED", "SYNCED", "SYNCED", "SYNCED"}) {
					return fmt.Errorf("no synced row for %s:\n%s", p, o)
				}
			}
			return nil
		})
	})

	t.Run("live edit", func(t *testing.T) {
		vs, err := os.ReadFile(filepath.Join(cfg, "virtualservice.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		vs = bytes.Replace(vs, []byte("weight: 80"), []byte("weight: 0"), 1)
		vs = bytes.Replace(vs, []byte("weight: 20"), []byte("weight: 100"), 1)
		tmp := filepath.Join(cfg, ".vs.tmp")
		if err := os.WriteFile(tmp, vs, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(cfg, "virtualservice.yaml")); err != nil {
			t.Fatal(err)
		}
		waitEvery(ctx, t, 45*time.Second, time.Second, "every request to v2 after the edit", func() error {
			counts, _, err := get(20)
			if err != nil {
				return err
			}
			if counts["v2"] != 20 {
				return fmt.Errorf("split %v, want all 20 on v2", counts)
			}
			return nil
		})
		waitFor(ctx, t, 10*time.Second, "local up reports the edit", func() error {
			if !strings.Contains(out.String(), "config changed: virtualservice.yaml") {
				return errors.New("no config changed line")
			}
			return nil
		})
	})

	t.Run("IPv6 link-local does not walk around the sidecar", func(t *testing.T) {
		var echoNS string
		for _, p := range st.Pods {
			if p.Name == "echo-v1" {
				echoNS = filepath.Base(p.Netns)
			}
		}
		checkIPv6Refused(ctx, t, st.Bridge, echoNS, 8080, func(args ...string) (string, error) {
			return ctl(append([]string{"local", "exec", "client", "-n", "localup", "--state-dir", stateDir, "--"}, args...)...)
		})
		// The mesh's own request still goes through (STRICT mTLS).
		if counts, _, err := get(5); err != nil || counts["v1"]+counts["v2"] != 5 {
			t.Errorf("mesh request after the IPv6 checks: %v, %v", counts, err)
		}
	})

	t.Run("sigterm removes everything", func(t *testing.T) {
		// Every process in the pods (apps, agents, proxies) and straitd.
		var pids []string
		for _, p := range st.Pods {
			o, err := exec.Command("ip", "netns", "pids", filepath.Base(p.Netns)).Output()
			if err != nil {
				t.Fatalf("ip netns pids %s: %v", p.Netns, err)
			}
			pids = append(pids, strings.Fields(string(o))...)
		}
		if len(pids) < 5 { // two apps, three agents, three proxies
			t.Fatalf("pods run pids %v, want their apps and sidecars", pids)
		}
		if up := processesMentioning(st.WorkDir); len(up) == 0 {
			t.Fatalf("no process mentions the work dir %s (straitd's --ca-dir)", st.WorkDir)
		}
		if err := up.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-upDone:
			stopped = true
			if err != nil {
				t.Errorf("local up after SIGTERM: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("local up did not exit within 60s of SIGTERM")
		}
		if !strings.Contains(out.String(), "everything local up made is gone") {
			t.Errorf("no teardown line in local up's output")
		}
		if promURL != "" {
			if resp, err := http.Get(promURL + "/-/ready"); err == nil {
				resp.Body.Close()
				t.Errorf("the Prometheus of --prometheus still answers on %s", promURL)
			}
		}
		for _, pid := range pids {
			if _, err := os.Stat(filepath.Join("/proc", pid)); err == nil {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
				t.Errorf("process %s of a pod left: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
		for _, p := range st.Pods {
			if _, err := os.Stat(p.Netns); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("namespace file %s left: %v", p.Netns, err)
			}
		}
		if err := exec.Command("ip", "link", "show", st.Bridge).Run(); err == nil {
			t.Errorf("bridge %s left", st.Bridge)
		}
		if pids := processesMentioning(st.WorkDir); len(pids) > 0 {
			t.Errorf("processes of the mesh left: %v", pids)
		}
		for _, p := range []string{st.WorkDir, filepath.Join(stateDir, "state.json"), filepath.Join(stateDir, "lock")} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left: %v", p, err)
			}
		}
		if o, err := ctl("local", "exec", "client", "--state-dir", stateDir, "--", "true"); err == nil || !strings.Contains(o, "no local mesh is running; start one with straitctl local up") {
			t.Errorf("exec after teardown: %v %s", err, o)
		}
	})
}

// A config local up cannot run is refused before anything is made, with a
// message naming the file, the document and the field.
func TestLocalUpRefusesBadConfig(t *testing.T) {
	requireMesh(t)
	straitctl := filepath.Join(binDir, "straitctl")
	if _, err := os.Stat(straitctl); err != nil {
		testreq.Missing(t, "no straitctl in %s: build ./cmd/... into STRAIT_BIN_DIR", binDir)
	}
	dir := configDir(t, map[string]string{"we.yaml": `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: a, namespace: x}
spec: {address: 10.213.78.2}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: b, namespace: x}
spec: {address: 10.213.79.2}
`})
	stateDir := filepath.Join(t.TempDir(), "state")
	o, err := exec.Command(straitctl, "local", "up", "--config-dir", dir, "--bin-dir", binDir, "--state-dir", stateDir).CombinedOutput()
	if err == nil || !strings.Contains(string(o), "we.yaml: document 2: WorkloadEntry x/b: spec.address 10.213.79.2 is outside 10.213.78.0/24") {
		t.Fatalf("local up on two subnets: %v %s", err, o)
	}
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir made for a refused config: %v", err)
	}
}

// echoGet is one line of `strait-echo get`.
type echoGet struct {
	Status int `json:"status"`
	Reply  *struct {
		Version string            `json:"version"`
		Pod     string            `json:"pod"`
		Remote  string            `json:"remote"`
		Headers map[string]string `json:"headers"`
	} `json:"reply"`
}

// containsRow reports whether a line of out has the fields of row in order
// as whole whitespace-separated fields (the first field first).
func containsRow(out string, row []string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < len(row) || f[0] != row[0] {
			continue
		}
		i := 0
		for _, x := range f {
			if i < len(row) && x == row[i] {
				i++
			}
		}
		if i == len(row) {
			return true
		}
	}
	return false
}

// processesMentioning lists the pids whose command line contains s.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), s) {
			pids = append(pids, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return pids
}
