// Command sidecar measures one sidecar (strait-agent with its strait-proxy)
// idle and at start: straitd in file mode serves S ServiceEntries, the
// agent runs `proxy sidecar` in a network namespace of its own (no
// capture, so no iptables), and once its readiness port answers the
// program reports, for each process (one when the agent runs the proxy
// in its own, two when it executes strait-proxy), VmRSS, VmHWM, the Go heap and
// goroutines (from STRAIT_AGENT_DEBUG_ADDR / STRAIT_PROXY_DEBUG_ADDR,
// internal/debugserve), the binary's size, and the time from exec to
// ready. See bench/README.md ("Sidecar memory and startup").
//
//	go run ./bench/sidecar [-services 1000] [-scope 10] [-baseline DIR] [-runs 3] [-pprof DIR] [-exec]
//
// It needs root (network namespaces) and bin/ built (make build).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/netns"
)

type options struct {
	services, endpoints, scope int
	bin, baseline, straitd     string
	runs, concurrency          int
	settle, timeout            time.Duration
	pprofDir, smapsDir         string
	verbose, exec, debug       bool
	env                        envList
	variants                   variantList
}

// variantList is a repeatable -variant NAME:KEY=VALUE[,KEY=VALUE] flag:
// the -bin build again, as build NAME, with that environment added.
type variantList []build

func (v *variantList) String() string { return fmt.Sprint(len(*v)) }
func (v *variantList) Set(s string) error {
	name, env, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return fmt.Errorf("-variant %q: want NAME:KEY=VALUE[,KEY=VALUE]", s)
	}
	b := build{name: name}
	for _, kv := range strings.Split(env, ",") {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("-variant %q: %q is not KEY=VALUE", s, kv)
		}
		b.env = append(b.env, kv)
	}
	*v = append(*v, b)
	return nil
}

// envList is a repeatable -env KEY=VALUE flag.
type envList []string

func (e *envList) String() string { return fmt.Sprint([]string(*e)) }
func (e *envList) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("-env %q: want KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sidecar:", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	flag.IntVar(&o.services, "services", 1000, "ServiceEntries straitd serves (each one port 80, STATIC)")
	flag.IntVar(&o.endpoints, "endpoints", 10, "endpoints of each ServiceEntry")
	flag.IntVar(&o.scope, "scope", 10, "also measure with a Sidecar whose egress lists this many services (0: skip)")
	flag.StringVar(&o.bin, "bin", "bin", "directory of the strait-agent and strait-proxy under test")
	flag.StringVar(&o.baseline, "baseline", "", "directory of a second strait-agent and strait-proxy (e.g. built from main) measured in the same run")
	flag.StringVar(&o.straitd, "straitd", "bin/straitd", "the control plane")
	flag.IntVar(&o.runs, "runs", 3, "sidecar starts per build and scope; the tables show medians")
	flag.IntVar(&o.concurrency, "concurrency", 2, "the agent's --concurrency (Istio's injected default is 2)")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "idle time between ready and the measurement")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long a sidecar may take to become ready")
	flag.StringVar(&o.pprofDir, "pprof", "", "save each process's heap profile of the last run here")
	flag.StringVar(&o.smapsDir, "smaps", "", "save each process's /proc/PID/smaps of the last run here, and print its resident KiB per mapping")
	flag.BoolVar(&o.verbose, "v", false, "pass the processes' logs through")
	flag.BoolVar(&o.exec, "exec", false, "also measure the -bin build with STRAIT_PROXY_MODE=exec (the agent executes strait-proxy), as build \"this-exec\"")
	flag.BoolVar(&o.debug, "debug", true, "serve the processes' debug endpoints (STRAIT_*_DEBUG_ADDR: the runtime's memory classes, -pprof); -debug=false measures the sidecar as a pod runs it, with no debug server and so no heap profiling")
	flag.Var(&o.variants, "variant", "NAME:KEY=VALUE[,KEY=VALUE]: also measure the -bin build with that environment, as build NAME (e.g. gogc50:GOGC=50); repeatable")
	flag.Var(&o.env, "env", "KEY=VALUE added to the agent's environment, which the proxy inherits (e.g. GOGC=50); repeatable")
	flag.Parse()
	if !o.debug && o.pprofDir != "" {
		return errors.New("-pprof reads the heap profile from the debug server: drop -debug=false")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	builds := []build{{name: "this", dir: o.bin}}
	if o.exec {
		builds = append(builds, build{name: "this-exec", dir: o.bin, env: []string{"STRAIT_PROXY_MODE=exec"}})
	}
	for _, v := range o.variants {
		v.dir = o.bin
		builds = append(builds, v)
	}
	if o.baseline != "" {
		builds = append([]build{{name: "baseline", dir: o.baseline}}, builds...)
	}
	for i := range builds {
		if err := builds[i].stat(); err != nil {
			return err
		}
		if err := builds[i].evict(); err != nil {
			return err
		}
	}
	scopes := []int{0}
	if o.scope > 0 {
		scopes = append(scopes, o.scope)
	}

	network, err := netns.NewNetwork(ctx, netns.NetworkOptions{Prefix: "sb"})
	if err != nil {
		return err
	}
	defer network.Close()
	defer network.CloseOnSignal()()
	pod, err := network.AddPod(ctx, "pod")
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "bench-sidecar-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	fmt.Printf("bench/sidecar: %d services x %d endpoints, concurrency %d, %d runs, settle %s, %s\n",
		o.services, o.endpoints, o.concurrency, o.runs, o.settle, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	var results []result
	for _, scope := range scopes {
		cp, err := startControlPlane(ctx, o, network, pod, filepath.Join(work, fmt.Sprintf("scope-%d", scope)), scope)
		if err != nil {
			return err
		}
		for r := range o.runs {
			for _, b := range builds {
				res, err := measure(ctx, o, b, pod, cp, scope, filepath.Join(work, fmt.Sprintf("pod-%d-%s-%d", scope, b.name, r)), r == o.runs-1)
				if err != nil {
					cp.stop()
					return fmt.Errorf("%s, scope %s, run %d: %w", b.name, scopeName(scope), r+1, err)
				}
				fmt.Fprintf(os.Stderr, "bench/sidecar: %s %s run %d: ready in %s, RSS %.1f + %.1f MiB\n",
					b.name, scopeName(scope), r+1, res.ready.Round(time.Millisecond), mib(res.agent.rssKB*1024), mib(res.proxy.rssKB*1024))
				results = append(results, res)
			}
		}
		cp.stop()
	}
	report(os.Stdout, builds, scopes, results)
	return nil
}

func scopeName(scope int) string {
	if scope == 0 {
		return "all services"
	}
	return fmt.Sprintf("Sidecar, %d services", scope)
}

// build is one pair of binaries under test.
type build struct {
	name, dir            string
	agentSize, proxySize int64
	env                  []string // added to the agent's environment
}

func (b *build) stat() error {
	var err error
	dir, err := filepath.Abs(b.dir)
	if err != nil {
		return err
	}
	b.dir = dir
	for _, f := range []struct {
		name string
		size *int64
	}{{"strait-agent", &b.agentSize}, {"strait-proxy", &b.proxySize}} {
		st, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil {
			return fmt.Errorf("%s build: %w (make build, or -bin/-baseline)", b.name, err)
		}
		*f.size = st.Size()
	}
	return nil
}

// evict drops the binaries' pages from the page cache, so that the first
// start reads them as a pod's first start from an image does (readahead,
// in large folios that one fault maps whole) whichever way the file was
// written: a binary just written by the linker or cp sits in the page
// cache in the folios the write made, and its RssFile differs from the
// same bytes read from disk by a few MiB. Only these two files' pages
// go.
func (b *build) evict() error {
	for _, name := range []string{"strait-agent", "strait-proxy"} {
		path := filepath.Join(b.dir, name)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = f.Sync() // dirty pages (a binary just linked) are not dropped
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: drop from the page cache: %w", path, err)
		}
	}
	return nil
}

var errExited = errors.New("process exited")

func mib(b float64) float64 { return b / (1 << 20) }
