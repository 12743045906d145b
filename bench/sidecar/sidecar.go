package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/netns"
)

// Loopback ports of the debug servers inside the pod.
const (
	agentDebugAddr = "127.0.0.1:16060"
	proxyDebugAddr = "127.0.0.1:16061"
)

// result is one sidecar start.
type result struct {
	build     string
	scope     int
	ready     time.Duration // exec of the agent → its readiness port answers 200
	proxyExec time.Duration // exec of the agent → the proxy process exists
	clusters  float64       // the proxy's cluster_manager.active_clusters
	agent     processStats
	proxy     processStats // zero when the proxy runs in the agent's process
	// oneProcess: the agent started no proxy process (it runs strait-proxy
	// in its own, the default since issue #24); agent is the sidecar.
	oneProcess bool
}

type processStats struct {
	procStatus
	runtime map[string]float64 // nil when the build has no debug server
}

// measure starts the build's agent in the pod, waits for readiness, lets
// it idle for o.settle and reads both processes' figures.
func measure(ctx context.Context, o options, b build, pod *netns.Pod, cp *controlPlane, scope int, dir string, profile bool) (result, error) {
	res := result{build: b.name, scope: scope}
	if err := os.MkdirAll(filepath.Join(dir, "proxy"), 0o755); err != nil {
		return res, err
	}
	proxyBin := filepath.Join(b.dir, "strait-proxy")
	proxyConfig := fmt.Sprintf(`{"discoveryAddress":%q,"binaryPath":%q,"configPath":%q,"proxyAdminPort":15000,"statusPort":15020}`,
		cp.xdsAddr, proxyBin, filepath.Join(dir, "proxy"))
	env := []string{
		"POD_NAME=" + podName,
		"POD_NAMESPACE=" + benchNamespace,
		"INSTANCE_IP=" + pod.IP.String(),
		"SERVICE_ACCOUNT=default",
		"PROXY_CONFIG=" + proxyConfig,
		"ISTIO_META_WORKLOAD_NAME=" + podName,
		"ISTIO_META_INTERCEPTION_MODE=REDIRECT",
		"MINIMUM_DRAIN_DURATION=1s",
		"HOME=" + dir,
	}
	if o.debug {
		env = append(env, "STRAIT_AGENT_DEBUG_ADDR="+agentDebugAddr, "STRAIT_PROXY_DEBUG_ADDR="+proxyDebugAddr)
	}
	env = append(env, o.env...)
	env = append(env, b.env...)
	var logw io.Writer
	if o.verbose {
		logw = os.Stderr
	}
	cmd := pod.Command(context.WithoutCancel(ctx), netns.ExecOptions{Env: env, Dir: dir, Stdout: logw, Stderr: logw},
		filepath.Join(b.dir, "strait-agent"), "proxy", "sidecar", "--domain", benchNamespace+".svc.cluster.local",
		"--concurrency", strconv.Itoa(o.concurrency))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Cancel() // kills the process group: the agent and the proxy
		<-exited
	}()
	agentPID := cmd.Process.Pid // nsenter execs the agent
	proxyPID := 0
	readyURL := "http://" + net.JoinHostPort(pod.IP.String(), "15021") + "/healthz/ready"
	client := &http.Client{Timeout: time.Second}
	err := waitFor(ctx, o.timeout, exited, func() error {
		if proxyPID == 0 {
			if pid := proxyChild(agentPID, proxyBin); pid != 0 {
				proxyPID, res.proxyExec = pid, time.Since(start)
			}
		}
		resp, err := client.Get(readyURL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("agent readiness: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("sidecar not ready: %w", err)
	}
	res.ready = time.Since(start)
	if proxyPID == 0 {
		// Ready without a proxy process: the agent runs the proxy in
		// its own (settings.ProxyInProcess).
		proxyPID = proxyChild(agentPID, proxyBin)
		res.oneProcess = proxyPID == 0
	}
	select {
	case <-time.After(o.settle):
	case <-ctx.Done():
		return res, ctx.Err()
	}

	inPod := podClient(pod)
	type process struct {
		pid   int
		debug string
		out   *processStats
		name  string
	}
	procs := []process{{agentPID, agentDebugAddr, &res.agent, "agent"}}
	if !res.oneProcess {
		procs = append(procs, process{proxyPID, proxyDebugAddr, &res.proxy, "proxy"})
	}
	for _, p := range procs {
		st, err := readStatus(p.pid)
		if err != nil {
			return res, err
		}
		p.out.procStatus = st
		if profile && o.smapsDir != "" {
			if err := saveSmaps(p.pid, filepath.Join(o.smapsDir, fmt.Sprintf("%s-scope%d-%s.smaps", b.name, scope, p.name))); err != nil {
				fmt.Fprintf(os.Stderr, "bench/sidecar: %s smaps: %v\n", p.name, err)
			}
		}
		p.out.runtime = fetchRuntime(inPod, p.debug) // before the profile, which allocates
		if profile && o.pprofDir != "" {
			if err := saveProfile(inPod, p.debug, filepath.Join(o.pprofDir, fmt.Sprintf("%s-scope%d-%s.heap.pb.gz", b.name, scope, p.name))); err != nil {
				fmt.Fprintf(os.Stderr, "bench/sidecar: %s heap profile: %v\n", p.name, err)
			}
		}
	}
	res.clusters = dynamicClusters(inPod) // after the figures: the dump allocates
	if o.verbose {
		for _, path := range []string{"stats", "config_dump"} {
			if resp, err := inPod.Get("http://127.0.0.1:15000/" + path); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = os.WriteFile(filepath.Join(os.TempDir(), "bench-sidecar-"+path), b, 0o644)
			}
		}
	}
	return res, nil
}

// podClient dials from inside the pod's network namespace, where the
// debug servers and the proxy's admin listen on loopback.
func podClient(pod *netns.Pod) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := pod.Do(nil, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

func fetchRuntime(c *http.Client, addr string) map[string]float64 {
	resp, err := c.Get("http://" + addr + "/debug/runtime")
	if err != nil {
		return nil // a build without the debug server
	}
	defer resp.Body.Close()
	var m map[string]float64
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&m) != nil {
		return nil
	}
	return m
}

func saveProfile(c *http.Client, addr, path string) error {
	resp, err := c.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET heap: %s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dynamicClusters counts the proxy's dynamic active clusters in its admin
// /config_dump; -1 if it cannot.
func dynamicClusters(c *http.Client) float64 {
	resp, err := c.Get("http://127.0.0.1:15000/config_dump")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var dump struct {
		Configs []struct {
			DynamicActiveClusters []json.RawMessage `json:"dynamicActiveClusters"`
		} `json:"configs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dump); err != nil {
		return -1
	}
	n := 0
	for _, c := range dump.Configs {
		n += len(c.DynamicActiveClusters)
	}
	return float64(n)
}

// proxyChild is the agent's child process running proxyBin, or 0 (a
// child seen between fork and exec still runs the agent).
func proxyChild(agentPID int, proxyBin string) int {
	for _, c := range children(agentPID) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); err == nil && exe == proxyBin {
			return c
		}
	}
	return 0
}
