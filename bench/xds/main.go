// Command xds is the control-plane load harness: N simulated proxies (real
// gRPC ADS clients, state of the world or delta) against a control plane
// serving a generated mesh of S services x E endpoints; it triggers an
// endpoints change and a VirtualService change and reports, per change,
// the convergence distribution, how many proxies were pushed to, and the
// control plane's CPU seconds and peak RSS. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// backend is a control plane under test. straitd is the only one today;
// Istio's pilot-discovery needs the Kubernetes API server harness
// (internal/testenv/kube) to read the same mesh, and would be a second
// implementation of this interface.
type backend interface {
	Name() string
	// Start serves m and returns the xDS address and the process id.
	Start(ctx context.Context, m *mesh) (xdsAddr string, pid int, err error)
	Stop()
}

type straitd struct {
	bin string
	cmd *exec.Cmd
}

func (s *straitd) Name() string { return "straitd" }

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (s *straitd) Start(ctx context.Context, m *mesh) (string, int, error) {
	xdsAddr, err := freePort()
	if err != nil {
		return "", 0, err
	}
	monAddr, err := freePort()
	if err != nil {
		return "", 0, err
	}
	s.cmd = exec.Command(s.bin, "--config-dir", m.dir, "--xds-addr", xdsAddr, "--monitoring-addr", monAddr, "--log-level", "warn")
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	s.cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	if err := s.cmd.Start(); err != nil {
		return "", 0, fmt.Errorf("start %s: %w (build it with `make build`)", s.bin, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + monAddr + "/healthz/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return "", 0, errors.New("straitd not ready within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return xdsAddr, s.cmd.Process.Pid, nil
}

func (s *straitd) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	}
}

// cpuSeconds is utime+stime of pid from /proc/PID/stat.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// peakRSS is VmHWM of pid in MiB.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

type result struct {
	phase      string
	latencies  []time.Duration
	pushedTo   int
	expected   int
	cpu        float64
	wall       time.Duration
	unexpected int
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds)-1) * p)
	return ds[i]
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/xds:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		proxies    = flag.Int("proxies", 100, "simulated proxies")
		services   = flag.Int("services", 100, "services")
		endpoints  = flag.Int("endpoints", 10, "endpoints per service")
		namespaces = flag.Int("namespaces", 10, "namespaces the services and proxies are spread over")
		scoped     = flag.Bool("sidecar-scope", true, "give every namespace a Sidecar with egress ./* (proxies see only their namespace)")
		delta      = flag.Bool("delta", false, "simulated proxies use delta xDS instead of state of the world")
		ramp       = flag.Int("ramp", 200, "new connections per second")
		bin        = flag.String("straitd", "bin/straitd", "straitd binary")
		backendF   = flag.String("backend", "straitd", "control plane: straitd (pilot-discovery needs internal/testenv/kube; see README)")
		timeout    = flag.Duration("timeout", 120*time.Second, "longest wait for each phase")
		quiet      = flag.Duration("quiet", 2*time.Second, "after convergence, how long to keep watching for pushes to other proxies")
	)
	flag.Parse()
	var be backend
	switch *backendF {
	case "straitd":
		be = &straitd{bin: *bin}
	default:
		return fmt.Errorf("-backend %q: only straitd is implemented; pilot-discovery needs the Kubernetes API server harness (internal/testenv/kube)", *backendF)
	}
	dir, err := os.MkdirTemp("", "strait-bench-xds-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m := &mesh{dir: dir, services: *services, endpoints: *endpoints, proxies: *proxies, namespaces: *namespaces, scoped: *scoped}
	if err := m.write(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, pid, err := be.Start(ctx, m)
	if err != nil {
		return err
	}
	defer be.Stop()

	// Connect the proxies at the ramp rate.
	cpu0 := cpuSeconds(pid)
	start := time.Now()
	clients := make([]*client, *proxies)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(max(1, *ramp)))
	for i := range clients {
		<-tick.C
		c := &client{nodeID: m.nodeID(i), delta: *delta}
		clients[i] = c
		conn, err := dial(addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		wg.Go(func() { c.run(ctx, conn) })
	}
	tick.Stop()
	var initial []time.Duration
	if err := waitFor(*timeout, func() bool {
		initial = initial[:0]
		for _, c := range clients {
			c.mu.Lock()
			synced, at, st, cerr := !c.syncedAt.IsZero(), c.syncedAt, c.started, c.err
			c.mu.Unlock()
			if cerr != nil {
				return true
			}
			if !synced {
				return false
			}
			initial = append(initial, at.Sub(st))
		}
		return true
	}); err != nil {
		return fmt.Errorf("initial sync: %w", err)
	}
	for _, c := range clients {
		if c.err != nil {
			return fmt.Errorf("proxy %s: %w", c.nodeID, c.err)
		}
	}
	slices.Sort(initial)
	results := []result{{phase: "initial sync", latencies: initial, pushedTo: len(initial), expected: *proxies, cpu: cpuSeconds(pid) - cpu0, wall: time.Since(start)}}

	// Endpoints change: service 0 gets a new last endpoint.
	marker := endpointIP(0, *endpoints-1, 1)
	r, err := phase("endpoints change", clients, m.dependents(0), pid, *timeout, *quiet, marker, func() error {
		return m.writeFile("svc-0.yaml", m.serviceYAML(0, 1))
	})
	if err != nil {
		return err
	}
	results = append(results, r)
	// VirtualService change on service 1 (another namespace).
	svc := min(1, *services-1)
	r, err = phase("VirtualService change", clients, m.dependents(svc), pid, *timeout, *quiet, "benchvs", func() error {
		return m.writeFile("vs.yaml", m.virtualServiceYAML(svc))
	})
	if err != nil {
		return err
	}
	results = append(results, r)

	proto := "SotW"
	if *delta {
		proto = "delta"
	}
	fmt.Printf("\n%s: %d proxies (%s), %d services x %d endpoints, %d namespaces, sidecar scoping %v; peak RSS %.0f MiB\n\n",
		be.Name(), *proxies, proto, *services, *endpoints, *namespaces, *scoped, peakRSS(pid))
	fmt.Println("| phase | proxies pushed (expected) | other proxies pushed | p50 | p90 | p99 | max | CPU s | wall |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Printf("| %s | %d (%d) | %d | %v | %v | %v | %v | %.2f | %v |\n", r.phase, r.pushedTo, r.expected, r.unexpected,
			pct(r.latencies, .5).Round(time.Millisecond), pct(r.latencies, .9).Round(time.Millisecond),
			pct(r.latencies, .99).Round(time.Millisecond), pct(r.latencies, 1).Round(time.Millisecond), r.cpu, r.wall.Round(time.Millisecond))
	}
	cancel()
	wg.Wait()
	for _, r := range results[1:] {
		if r.pushedTo != r.expected || r.unexpected != 0 {
			return fmt.Errorf("%s: pushed to %d proxies with the change (want %d) and %d others (want 0)", r.phase, r.pushedTo, r.expected, r.unexpected)
		}
	}
	return nil
}

// phase arms every client with marker, applies the change, waits until
// `expected` proxies received a response carrying marker, watches for
// `quiet` more, and reports.
func phase(name string, clients []*client, expected, pid int, timeout, quiet time.Duration, marker string, change func() error) (result, error) {
	for _, c := range clients {
		c.arm(marker)
	}
	cpu0 := cpuSeconds(pid)
	t0 := time.Now()
	if err := change(); err != nil {
		return result{}, err
	}
	count := func() (lat []time.Duration, others int) {
		for _, c := range clients {
			c.mu.Lock()
			if !c.changedAt.IsZero() {
				lat = append(lat, c.changedAt.Sub(t0))
			} else if c.received > 0 {
				others++
			}
			c.mu.Unlock()
		}
		return lat, others
	}
	err := waitFor(timeout, func() bool { l, _ := count(); return len(l) >= expected })
	wall := time.Since(t0)
	time.Sleep(quiet)
	lat, others := count()
	slices.Sort(lat)
	r := result{phase: name, latencies: lat, pushedTo: len(lat), expected: expected, unexpected: others, cpu: cpuSeconds(pid) - cpu0, wall: wall}
	if err != nil {
		return r, fmt.Errorf("%s: %d of %d proxies converged: %w", name, len(lat), expected, err)
	}
	return r, nil
}

func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
