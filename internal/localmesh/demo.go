package localmesh

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The demo's fixed shape: what examples/demo describes.
const (
	DemoNamespace = "demo"
	DemoHost      = "echo.demo.svc.cluster.local"
	DemoVIP       = "240.240.0.10"
	DemoURL       = "http://" + DemoVIP + "/"
	// DemoVirtualServiceFile is the file of examples/demo that holds the
	// VirtualService; the demo rewrites it to change the weights.
	DemoVirtualServiceFile = "virtualservice.yaml"
)

// DemoWorkloads are the pods of the demo, with the addresses that
// examples/demo/mesh.yaml gives them.
func DemoWorkloads() []Workload {
	return []Workload{
		{Name: "client", Namespace: DemoNamespace, ConfigIP: "10.99.0.10"},
		{Name: "echo-v1", Namespace: DemoNamespace, ConfigIP: "10.99.0.11", App: []string{"strait-echo", "--addr", ":8080", "--version", "v1"}, AppPort: 8080},
		{Name: "echo-v2", Namespace: DemoNamespace, ConfigIP: "10.99.0.12", App: []string{"strait-echo", "--addr", ":8080", "--version", "v2"}, AppPort: 8080},
	}
}

// DemoVirtualService renders the demo's VirtualService with the given
// weights for subsets v1 and v2.
func DemoVirtualService(v1, v2 int) []byte {
	return fmt.Appendf(nil, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: echo
  namespace: demo
spec:
  hosts:
  - echo.demo.svc.cluster.local
  http:
  - route:
    - destination:
        host: echo.demo.svc.cluster.local
        subset: v1
      weight: %d
    - destination:
        host: echo.demo.svc.cluster.local
        subset: v2
      weight: %d
`, v1, v2)
}

// DemoOptions configures RunDemo.
type DemoOptions struct {
	BinDir    string
	ConfigDir string
	Out       io.Writer
	// Requests per measurement (200 by default).
	Requests int
	// InitialWeights are the weights examples/demo configures (80/20) and
	// NewWeights those the demo rewrites to.
	InitialWeights, NewWeights [2]int
}

// RunDemo runs the demo end to end and tears it down: it prints what it
// does and the observed split next to the configured weights.
func RunDemo(ctx context.Context, o DemoOptions) (err error) {
	if o.Requests == 0 {
		o.Requests = 200
	}
	if o.InitialWeights == [2]int{} {
		o.InitialWeights = [2]int{80, 20}
	}
	if o.NewWeights == [2]int{} {
		o.NewWeights = [2]int{30, 70}
	}
	out := o.Out
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	step := func(format string, args ...any) { fmt.Fprintf(out, "\n==> "+format+"\n", args...) }

	say("Strait demo: a service mesh on this host, in network namespaces, no cluster.")
	step("Starting straitd on %s and three pods (client, echo-v1, echo-v2)", o.ConfigDir)
	start := time.Now()
	logger := slog.New(&progressHandler{out: out})
	m, err := Start(ctx, Options{BinDir: o.BinDir, ConfigDir: o.ConfigDir, Workloads: DemoWorkloads(), Logger: logger})
	if err != nil {
		return err
	}
	defer func() { //nolint:contextcheck // teardown must run after ctx is cancelled (Ctrl-C)
		step("Tearing down (processes, namespaces, bridge)")
		if cerr := m.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if err == nil {
			say("    done. Everything the demo made is gone.")
		}
	}()
	say("    mesh up in %s; each pod's traffic is captured by iptables (REDIRECT to 15001/15006)", time.Since(start).Round(time.Millisecond))

	client := m.Pod("client")
	step("Sending %d requests from the client pod to %s (%s)", o.Requests, DemoURL, DemoHost)
	split := client.SendRequests(ctx, DemoURL, o.Requests)
	printSplit(out, split, o.InitialWeights)
	if err := checkSplit(split, o.InitialWeights, 10); err != nil {
		return fmt.Errorf("first split: %w (logs in %s)", err, m.LogPath("straitd"))
	}
	for ip, n := range split.Remotes {
		say("    the echo app saw %d requests arrive from %s (through the server pod's sidecar)", n, ip)
	}

	step("Rewriting %s live: v1 %d%%, v2 %d%% (load keeps running)", DemoVirtualServiceFile, o.NewWeights[0], o.NewWeights[1])
	load := client.StartLoad(ctx, DemoURL, 2)
	written := time.Now()
	if err := m.WriteConfig(DemoVirtualServiceFile, DemoVirtualService(o.NewWeights[0], o.NewWeights[1])); err != nil {
		load.Stop()
		return err
	}
	want := map[string]uint32{
		"outbound|80|v1|" + DemoHost: uint32(o.NewWeights[0]),
		"outbound|80|v2|" + DemoHost: uint32(o.NewWeights[1]),
	}
	err = waitFor(ctx, 10*time.Second, func() error {
		got, err := client.RouteWeights(ctx)
		if err != nil {
			return err
		}
		for k, w := range want {
			if got[k] != w {
				return fmt.Errorf("client proxy routes have %s weight %d, want %d", k, got[k], w)
			}
		}
		return nil
	})
	applied := time.Since(written)
	during := load.Stop()
	if err != nil {
		return fmt.Errorf("new weights did not reach the client proxy: %w", err)
	}
	say("    the client's proxy had the new routes %s after the file was written", applied.Round(time.Millisecond))
	say("    %d requests ran during the change, %d failed", during.Total, during.Failures)
	if during.Failures > 0 {
		return fmt.Errorf("%d of %d requests failed during the change (first: %s)", during.Failures, during.Total, during.FirstError)
	}

	step("Sending %d requests again", o.Requests)
	split = client.SendRequests(ctx, DemoURL, o.Requests)
	printSplit(out, split, o.NewWeights)
	if err := checkSplit(split, o.NewWeights, 10); err != nil {
		return fmt.Errorf("second split: %w", err)
	}
	n, err := client.ClusterRequests(ctx, "outbound|80|v2|"+DemoHost)
	if err == nil {
		say("    the client's proxy counted %d requests to outbound|80|v2|%s (envoy_cluster_upstream_rq_total)", n, DemoHost)
	}
	step("Demo passed in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

func printSplit(out io.Writer, s Split, weights [2]int) {
	fmt.Fprintf(out, "    %-8s %-11s %-10s\n", "version", "configured", "observed")
	for i, v := range []string{"v1", "v2"} {
		pct := s.Percent(v)
		bar := strings.Repeat("#", int(math.Round(pct/2.5)))
		fmt.Fprintf(out, "    %-8s %9d%%  %6.1f%% (%3d)  %s\n", v, weights[i], pct, s.Counts[v], bar)
	}
	if s.Failures > 0 {
		fmt.Fprintf(out, "    failed: %d of %d (first: %s)\n", s.Failures, s.Total, s.FirstError)
	}
}

// checkSplit reports whether the observed split is within tolerance
// percentage points of the weights, with no failures.
func checkSplit(s Split, weights [2]int, tolerance float64) error {
	if s.Failures > 0 {
		return fmt.Errorf("%d of %d requests failed (first: %s)", s.Failures, s.Total, s.FirstError)
	}
	for i, v := range []string{"v1", "v2"} {
		if d := math.Abs(s.Percent(v) - float64(weights[i])); d > tolerance {
			return fmt.Errorf("%s got %.1f%% of requests, configured %d%% (more than %.0f points off)", v, s.Percent(v), weights[i], tolerance)
		}
	}
	return nil
}

// ProgressLogger is a logger that prints the mesh's progress records as
// indented lines ("    sidecar ready  pod=client ..."), as the demo and
// straitctl local up show them.
func ProgressLogger(out io.Writer) *slog.Logger { return slog.New(&progressHandler{out: out}) }

// progressHandler prints the mesh's progress records as indented lines.
type progressHandler struct {
	out   io.Writer
	attrs []slog.Attr
}

func (h *progressHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *progressHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("    ")
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "  %s=%v", a.Key, a.Value)
		return true
	})
	b.WriteString("\n")
	_, err := io.WriteString(h.out, b.String())
	return err
}

func (h *progressHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &progressHandler{out: h.out, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *progressHandler) WithGroup(string) slog.Handler { return h }

// DefaultBinDir is the bin/ directory beside the running executable, or
// ./bin.
func DefaultBinDir() string {
	if exe, err := os.Executable(); err == nil {
		return filepath.Dir(exe)
	}
	return "bin"
}
