// Command xds is the control-plane load harness: N simulated proxies (real
// gRPC ADS clients, state of the world or delta) against a control plane
// serving a generated mesh of S services x E endpoints; it triggers an
// endpoints change and a VirtualService change and reports, per change,
// the convergence distribution, how many proxies were pushed to, and the
// control plane's CPU seconds and peak RSS. See README.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// backend is a control plane under test: straitd in file mode (the
// generated mesh as files), straitd in Kubernetes mode and Istio's
// pilot-discovery (both reading the same mesh as Kubernetes objects from a
// test API server, internal/testenv/kube; see startKubeMesh).
type backend interface {
	Name() string
	// Start serves m and returns the xDS address and the process id.
	Start(ctx context.Context, m *mesh) (xdsAddr string, pid int, err error)
	// ChangeEndpoints gives service svc's last endpoint the address of
	// generation gen (endpointIP(svc, E-1, gen)).
	ChangeEndpoints(ctx context.Context, m *mesh, svc, gen int) error
	// AddVirtualService adds m.virtualServiceYAML(svc, rep), or replaces it
	// for rep > 1.
	AddVirtualService(ctx context.Context, m *mesh, svc, rep int) error
	Stop()
}

type straitd struct {
	bin      string
	logLevel string // straitd's --log-level
	cmd      *exec.Cmd
	monAddr  string
}

// profiled is a backend that serves Go's /debug/pprof.
type profiled interface {
	PprofURL() string
}

func (s *straitd) PprofURL() string { return "http://" + s.monAddr + "/debug/pprof" }

func (s *straitd) Name() string { return "straitd (file mode)" }

func (s *straitd) ChangeEndpoints(_ context.Context, m *mesh, svc, gen int) error {
	return m.writeFile(fmt.Sprintf("svc-%d.yaml", svc), m.serviceYAML(svc, gen))
}

func (s *straitd) AddVirtualService(_ context.Context, m *mesh, svc, rep int) error {
	return m.writeFile("vs.yaml", m.virtualServiceYAML(svc, rep))
}

// gatewayPhase is the phase that changes the gateways' VirtualService.
const gatewayPhase = "gateway VirtualService change"

// AddGatewayVirtualService adds m.gatewayVirtualServiceYAML(svc, rep), or
// replaces it for rep > 1.
func (s *straitd) AddGatewayVirtualService(m *mesh, svc, rep int) error {
	return m.writeFile("gateway-vs.yaml", m.gatewayVirtualServiceYAML(svc, rep))
}

// freePorts returns n loopback addresses with distinct free ports.
func freePorts(n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are picked, so that none repeats
		out = append(out, l.Addr().String())
	}
	return out, nil
}

func (s *straitd) Start(ctx context.Context, m *mesh) (string, int, error) {
	addrs, err := freePorts(2)
	if err != nil {
		return "", 0, err
	}
	xdsAddr, monAddr := addrs[0], addrs[1]
	s.monAddr = monAddr
	// No TLS port and CA: the bench measures plaintext xDS, and a fixed
	// :15012 would collide with another straitd on the host.
	s.cmd = exec.Command(s.bin, "--config-dir", m.dir, "--xds-addr", xdsAddr, "--monitoring-addr", monAddr, "--secure-xds-addr", "", "--log-level", s.logLevel)
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
	// runs are the repetitions of a change phase; the result itself is
	// the one with the median p99 (medianRun).
	runs []result
}

// medianRun returns the repetition whose p99 is the median of the
// repetitions' (the lower middle one for an even count), with every
// repetition in runs.
func medianRun(reps []result) result {
	sorted := slices.Clone(reps)
	slices.SortStableFunc(sorted, func(a, b result) int { return cmp.Compare(pct(a.latencies, .99), pct(b.latencies, .99)) })
	r := sorted[(len(sorted)-1)/2]
	r.runs = reps
	return r
}

// p99s lists the p99 of every repetition, in run order.
func (r result) p99s() string {
	if len(r.runs) < 2 {
		return ""
	}
	var parts []string
	for _, x := range r.runs {
		parts = append(parts, pct(x.latencies, .99).Round(time.Millisecond).String())
	}
	return strings.Join(parts, " ")
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

type options struct {
	proxies, services, endpoints, namespaces, ramp int
	scoped, delta                                  bool
	repeat                                         int
	timeout, quiet                                 time.Duration
	pprofDir                                       string
	trace                                          bool
	gateways                                       int
}

// report is one backend's run.
type report struct {
	backend string
	results []result
	rss     float64
	err     error
}

func run() error {
	var (
		o        options
		bin      = flag.String("straitd", "bin/straitd", "straitd binary")
		pilot    = flag.String("pilot-discovery", "", "pilot-discovery binary (default: the one hack/pilot-discovery-build.sh caches)")
		backendF = flag.String("backend", "straitd", "control planes, comma-separated, run one after the other: straitd (file mode), straitd-kube (Kubernetes mode), pilot-discovery (Istio, Kubernetes); 'compare' = straitd-kube,pilot-discovery")
	)
	flag.IntVar(&o.proxies, "proxies", 100, "simulated proxies")
	flag.IntVar(&o.gateways, "gateways", 0, "simulated gateway proxies (router mode, istio: ingressgateway) besides the sidecars, and a phase that changes a VirtualService bound to their Gateway (straitd file mode only)")
	flag.IntVar(&o.services, "services", 100, "services")
	flag.IntVar(&o.endpoints, "endpoints", 10, "endpoints per service")
	flag.IntVar(&o.namespaces, "namespaces", 10, "namespaces the services and proxies are spread over")
	flag.BoolVar(&o.scoped, "sidecar-scope", true, "give every namespace a Sidecar with egress ./* (proxies see only their namespace)")
	flag.BoolVar(&o.delta, "delta", false, "simulated proxies use delta xDS instead of state of the world")
	flag.IntVar(&o.ramp, "ramp", 20, "new connections per second (Istio's pilot-discovery rate-limits new xDS connections, PILOT_MAX_REQUESTS_PER_SECOND; every backend gets the same ramp)")
	flag.IntVar(&o.repeat, "repeat", 5, "how many times each change is made; the tables show the run with the median p99 and list every run's p99")
	flag.DurationVar(&o.timeout, "timeout", 120*time.Second, "longest wait for each phase")
	flag.DurationVar(&o.quiet, "quiet", 2*time.Second, "after convergence, how long to keep watching for pushes to other proxies")
	flag.StringVar(&o.pprofDir, "pprof", "", "if set, save straitd's heap profile after the initial sync, a CPU profile of each change and (Kubernetes mode) its log here")
	flag.BoolVar(&o.trace, "trace", false, "with -pprof: save Go execution traces of the changes instead of CPU profiles (go tool trace)")
	logLevel := flag.String("straitd-log-level", "warn", "straitd's --log-level (debug logs every push, with timestamps)")
	flag.Parse()
	if o.repeat < 1 {
		return fmt.Errorf("-repeat %d: want at least 1 (how many times each change is made)", o.repeat)
	}
	if o.gateways < 0 {
		return fmt.Errorf("-gateways %d: want 0 or more", o.gateways)
	}
	names := strings.Split(*backendF, ",")
	if *backendF == "compare" {
		names = []string{"straitd-kube", "pilot-discovery"}
	}
	var bes []backend
	for _, n := range names {
		switch n {
		case "straitd":
			bes = append(bes, &straitd{bin: *bin, logLevel: *logLevel})
		case "straitd-kube":
			sk := &straitdKube{bin: *bin, logLevel: *logLevel}
			if o.pprofDir != "" {
				sk.keepLog = filepath.Join(o.pprofDir, "straitd-kube.log")
			}
			bes = append(bes, sk)
		case "pilot-discovery":
			p := *pilot
			if p == "" {
				cache := os.Getenv("STRAIT_ISTIO_CACHE")
				if cache == "" {
					dir, _ := os.UserCacheDir()
					cache = dir + "/strait/istio"
				}
				p = cache + "/" + istioVersion + "/bin/pilot-discovery"
			}
			bes = append(bes, &pilotDiscovery{bin: p})
		default:
			return fmt.Errorf("-backend %q: want straitd, straitd-kube, pilot-discovery or compare", n)
		}
		if n != "straitd" && o.gateways > 0 {
			return fmt.Errorf("-gateways %d: only the straitd (file mode) backend has gateways, not %s; drop -gateways or use -backend straitd", o.gateways, n)
		}
	}
	var reports []report
	for _, be := range bes {
		fmt.Fprintf(os.Stderr, "bench/xds: %s: starting\n", be.Name())
		r := runOne(be, o)
		reports = append(reports, r)
		printReport(o, r)
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "bench/xds: %s: %v\n", be.Name(), r.err)
		}
	}
	if len(reports) > 1 {
		printSideBySide(reports)
	}
	var errs []error
	for _, r := range reports {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.backend, r.err))
		}
	}
	return errors.Join(errs...)
}

// istioVersion is the istio.io/istio version hack/pilot-discovery-build.sh
// builds by default.
const istioVersion = "v0.0.0-20260827124520-eed52ebb66ad"

func printReport(o options, r report) {
	proto := "SotW"
	if o.delta {
		proto = "delta"
	}
	fmt.Printf("\n%s: %d proxies (%s), %d gateways, %d services x %d endpoints, %d namespaces, sidecar scoping %v; peak RSS %.0f MiB\n\n",
		r.backend, o.proxies, proto, o.gateways, o.services, o.endpoints, o.namespaces, o.scoped, r.rss)
	fmt.Println("| phase | proxies pushed (expected) | other proxies pushed | p50 | p90 | p99 | max | CPU s | wall |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range r.results {
		fmt.Printf("| %s | %d (%d) | %d | %v | %v | %v | %v | %.2f | %v |\n", r.phase, r.pushedTo, r.expected, r.unexpected,
			pct(r.latencies, .5).Round(time.Millisecond), pct(r.latencies, .9).Round(time.Millisecond),
			pct(r.latencies, .99).Round(time.Millisecond), pct(r.latencies, 1).Round(time.Millisecond), r.cpu, r.wall.Round(time.Millisecond))
	}
	for _, r := range r.results {
		if p := r.p99s(); p != "" {
			fmt.Printf("\n%s: the median of %d runs; p99 of each run: %s", r.phase, len(r.runs), p)
		}
	}
	fmt.Println()
}

func printSideBySide(rs []report) {
	fmt.Printf("\nSide by side\n\n| phase | metric |")
	for _, r := range rs {
		fmt.Printf(" %s |", r.backend)
	}
	fmt.Printf("\n|---|---|%s\n", strings.Repeat("---|", len(rs)))
	phases := []string{"initial sync", "endpoints change", "VirtualService change", gatewayPhase}
	for _, ph := range phases {
		for _, metric := range []string{"p50", "p90", "p99", "max", "p99 of each run", "pushed (expected) / others", "CPU s"} {
			fmt.Printf("| %s | %s |", ph, metric)
			for _, r := range rs {
				var x *result
				for i := range r.results {
					if r.results[i].phase == ph {
						x = &r.results[i]
					}
				}
				switch {
				case x == nil:
					fmt.Print(" — |")
				case metric == "p99 of each run":
					fmt.Printf(" %s |", x.p99s())
				case metric == "pushed (expected) / others":
					fmt.Printf(" %d (%d) / %d |", x.pushedTo, x.expected, x.unexpected)
				case metric == "CPU s":
					fmt.Printf(" %.2f |", x.cpu)
				default:
					p := map[string]float64{"p50": .5, "p90": .9, "p99": .99, "max": 1}[metric]
					fmt.Printf(" %v |", pct(x.latencies, p).Round(time.Millisecond))
				}
			}
			fmt.Println()
		}
	}
	fmt.Print("| all | peak RSS MiB |")
	for _, r := range rs {
		fmt.Printf(" %.0f |", r.rss)
	}
	fmt.Println()
}

func runOne(be backend, o options) (rep report) {
	rep.backend = be.Name()
	dir, err := os.MkdirTemp("", "strait-bench-xds-")
	if err != nil {
		rep.err = err
		return rep
	}
	defer os.RemoveAll(dir)
	m := &mesh{dir: dir, services: o.services, endpoints: o.endpoints, proxies: o.proxies, namespaces: o.namespaces, scoped: o.scoped, gateways: o.gateways}
	if _, file := be.(*straitd); file {
		if err := m.write(); err != nil {
			rep.err = err
			return rep
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, pid, err := be.Start(ctx, m)
	defer be.Stop()
	if err != nil {
		rep.err = err
		return rep
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	rep.results, rep.err = drive(ctx, &wg, be, m, o, addr, pid)
	rep.rss = peakRSS(pid)
	return rep
}

func drive(ctx context.Context, wg *sync.WaitGroup, be backend, m *mesh, o options, addr string, pid int) ([]result, error) {
	// Connect the proxies at the ramp rate.
	cpu0 := cpuSeconds(pid)
	start := time.Now()
	// The sidecars first, then the gateways.
	clients := make([]*client, o.proxies+o.gateways)
	tick := time.NewTicker(time.Second / time.Duration(max(1, o.ramp)))
	for i := range clients {
		<-tick.C
		c := &client{nodeID: m.nodeID(i), meta: m.nodeMeta(i), delta: o.delta, routes: []string{"80"}}
		if g := i - o.proxies; g >= 0 {
			c.nodeID, c.meta, c.routes = m.gatewayNodeID(g), m.gatewayMeta(g), []string{"http.80"}
		}
		clients[i] = c
		conn, err := dial(addr)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { conn.Close() })
		wg.Go(func() { c.run(ctx, conn) })
	}
	tick.Stop()
	var initial []time.Duration
	var failed error
	if err := waitFor(o.timeout, func() bool {
		initial = initial[:0]
		for _, c := range clients {
			c.mu.Lock()
			synced, at, st, cerr := !c.syncedAt.IsZero(), c.syncedAt, c.started, c.err
			c.mu.Unlock()
			if cerr != nil {
				failed = fmt.Errorf("proxy %s: %w", c.nodeID, cerr)
				return true
			}
			if !synced {
				return false
			}
			initial = append(initial, at.Sub(st))
		}
		return true
	}); err != nil {
		return nil, fmt.Errorf("initial sync: %d of %d proxies synced: %w", len(initial), len(clients), err)
	}
	if failed != nil {
		return nil, failed
	}
	slices.Sort(initial)
	results := []result{{phase: "initial sync", latencies: initial, pushedTo: len(initial), expected: len(clients), cpu: cpuSeconds(pid) - cpu0, wall: time.Since(start)}}
	// Let the control plane settle (pushes triggered by the connections
	// themselves) before arming.
	time.Sleep(o.quiet)
	prof := newProfiler(be, o.pprofDir)
	prof.trace = o.trace
	fmt.Fprintf(os.Stderr, "bench/xds: %s: %d proxies synced; peak RSS so far %.0f MiB\n", be.Name(), len(clients), peakRSS(pid))
	prof.save("heap-after-sync", "heap")
	prof.save("memstats-after-sync", "heap?debug=1")
	prof.save("goroutines-after-sync", "goroutine?debug=1")

	// repeated makes one change o.repeat times (change and marker get the
	// repetition, from 1) and appends the median run to results.
	// The sidecars' phases watch the sidecars only: a gateway sees every
	// service (no Sidecar scopes it), so it may take their changes too.
	sidecars := clients[:o.proxies]
	repeated := func(name string, watched []*client, expected int, profile string, marker func(rep int) string, change func(rep int) error) error {
		var reps []result
		defer func() { results = append(results, medianRun(reps)) }()
		for rep := 1; rep <= o.repeat; rep++ {
			wait := prof.cpu(fmt.Sprintf("%s-%d", profile, rep), o.quiet)
			r, err := phase(name, watched, expected, pid, o.timeout, o.quiet, marker(rep), func() error { return change(rep) })
			wait()
			reps = append(reps, r)
			if err != nil {
				return err
			}
		}
		return nil
	}
	// Endpoints change: service 0's last endpoint moves, back and forth
	// between two addresses.
	gen := func(rep int) int { return 1 + (rep-1)%2 }
	if err := repeated("endpoints change", sidecars, m.dependents(0), "cpu-endpoints-change",
		func(rep int) string { return endpointIP(0, o.endpoints-1, gen(rep)) },
		func(rep int) error { return be.ChangeEndpoints(ctx, m, 0, gen(rep)) }); err != nil {
		return results, err
	}
	// VirtualService change on service 1 (another namespace): created,
	// then replaced with another route name.
	svc := min(1, o.services-1)
	if err := repeated("VirtualService change", sidecars, m.dependents(svc), "cpu-virtualservice-change", vsMarker,
		func(rep int) error { return be.AddVirtualService(ctx, m, svc, rep) }); err != nil {
		return results, err
	}
	// A VirtualService bound to the gateways' Gateway only: every gateway
	// takes it, and no sidecar gets a push (all proxies are watched).
	if o.gateways > 0 {
		file, ok := be.(*straitd)
		if !ok {
			return results, fmt.Errorf("%s: no gateways in this backend", be.Name())
		}
		if err := repeated(gatewayPhase, clients, o.gateways, "cpu-gateway-virtualservice-change", gwMarker,
			func(rep int) error { return file.AddGatewayVirtualService(m, svc, rep) }); err != nil {
			return results, err
		}
	}
	prof.save("heap-end", "heap")
	prof.save("memstats-end", "heap?debug=1")
	var errs []error
	for _, r := range results[1:] {
		for i, x := range r.runs {
			if x.pushedTo != x.expected || x.unexpected != 0 {
				errs = append(errs, fmt.Errorf("%s, run %d: pushed to %d proxies with the change (want %d) and %d others (want 0)", r.phase, i+1, x.pushedTo, x.expected, x.unexpected))
			}
		}
	}
	return results, errors.Join(errs...)
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
	fmt.Fprintf(os.Stderr, "bench/xds: %s: applying at %s\n", name, t0.UTC().Format("15:04:05.000000"))
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
	if len(lat) > 0 {
		fmt.Fprintf(os.Stderr, "bench/xds: %s: first proxy had it at %s, last at %s\n", name,
			t0.Add(lat[0]).UTC().Format("15:04:05.000000"), t0.Add(lat[len(lat)-1]).UTC().Format("15:04:05.000000"))
	}
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
