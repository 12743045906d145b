package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/agent/dns"
	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/meshview"
	"github.com/straitmesh/strait/internal/netns"
)

// upOptions are `local up`'s flags.
type upOptions struct {
	ConfigDir string
	BinDir    string
	StateDir  string
	// PollInterval is how often the config dir is checked for changes
	// to report.
	PollInterval time.Duration
	// DNSCapture turns on each pod's DNS proxy (localmesh.Options).
	DNSCapture bool
	// DNSUpstreams are the --dns-upstream values (see dnsUpstreams).
	DNSUpstreams []string
	// HostResolvConf is the host's resolv.conf, the default upstreams.
	HostResolvConf string
	// Prometheus starts a Prometheus scraping the mesh (localscrape.go).
	Prometheus bool
	// MeshConfig is straitd's mesh config file (--mesh), "" for the
	// defaults.
	MeshConfig string
}

func newUpCmd() *cobra.Command {
	o := upOptions{PollInterval: time.Second, HostResolvConf: "/etc/resolv.conf"}
	cmd := &cobra.Command{
		Use:   "up --config-dir DIR",
		Short: "Run your own mesh here: one pod (network namespace + sidecar) per WorkloadEntry of DIR",
		Long: `up reads the Istio YAML of DIR and starts straitd serving DIR itself, then
makes one pod per WorkloadEntry: a network namespace on a private bridge
(no uplink) at the WorkloadEntry's spec.address, its traffic captured by
iptables, a sidecar with the WorkloadEntry's namespace and serviceAccount
as its mTLS identity, and an app.

Addresses: every WorkloadEntry's spec.address becomes its pod's address, so
they must be IPv4 addresses in one private /24 (e.g. 10.99.0.2-254; .1 is
the host's address on the bridge, where straitd listens) that no route of
this host already covers. ServiceEntry VIPs (spec.addresses) must be in
240.240.0.0/16, the range the pods route to their sidecar.

The app of a pod is strait-echo, listening on the target ports of the
ServiceEntries that select the pod and reporting its "version" label; the
annotation local.strait.io/app: "CMD ARGS..." on the WorkloadEntry runs
another command instead (a bare name is looked up in --bin-dir).
Each pod's app and sidecar run as users of their own (the pod at .N: app
1338000+N, sidecar 1337000+N) in mount namespaces that show no other pod's
secrets and no CA key; local.strait.io/app-as-root: "true" runs an app as
root instead.

A WorkloadEntry that a Gateway's selector matches is a gateway pod instead:
strait-agent proxy router, no capture, no app; the Gateway's servers listen
on the pod's address, which this host reaches, and up prints them. A
credentialName NAME is read from DIR/credentials/NAMESPACE/NAME/ (tls.crt,
tls.key, ca.crt, ca.crl), copied into the gateway pod.

A WorkloadEntry annotated local.strait.io/outside-mesh: "true" is a host
outside the mesh: its pod runs the command of local.strait.io/app with no
sidecar and no capture (name it by its address in a MESH_EXTERNAL
ServiceEntry's endpoints, e.g. the external host behind an egress gateway).

With --dns-capture each pod's DNS goes to its sidecar agent: mesh names
resolve from straitd's name table (ServiceEntries without addresses to the
240.240.0.0/16 addresses straitd allocates them); the pods have no uplink,
so up serves DNS on the bridge's host address and forwards the other names
to this host's resolvers (--dns-upstream names others, or none).

up prints where Prometheus scrapes the mesh: each pod's agent on
15020/stats/prometheus (proxy, agent and, when the WorkloadEntry has
prometheus.io/port and /path annotations as a pod would, the app's
metrics) and straitd's monitoring port. --prometheus also starts one
(Debian's prometheus binary) scraping them every 5s, with its storage in
a temporary directory, its API and UI on 127.0.0.1.

--mesh-config FILE gives straitd a MeshConfig (Istio's YAML, e.g.
tracing: enableTracing, defaultConfig.tracing.zipkin.address and
sampling, extensionProviders), checked before anything starts; straitd
applies edits of FILE live.

up stays in the foreground: it reports config changes (straitd applies
edits to DIR live; new or changed WorkloadEntries need a restart of up)
and processes that exit. Ctrl-C or SIGTERM removes everything it made:
processes, namespaces, bridge, iptables rules, state file. One local mesh
runs at a time. Needs root.`,
		Example: `  sudo straitctl local up --config-dir examples/demo
  sudo straitctl local up --config-dir examples/ingress
  sudo straitctl local up --config-dir examples/egress
  # in another terminal:
  sudo straitctl local exec client -- strait-echo get -n 10 http://echo.demo.svc.cluster.local/
  sudo straitctl local status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.ConfigDir == "" {
				return errors.New("--config-dir is required: the directory of Istio YAML (WorkloadEntries, ServiceEntries, ...) to run")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runUp(ctx, cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.ConfigDir, "config-dir", "", "directory of Istio YAML; straitd serves it and watches it for edits")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", localmesh.DefaultBinDir(), "directory with straitd, strait-agent, strait-proxy and strait-echo")
	cmd.Flags().StringVar(&o.MeshConfig, "mesh-config", "", "Istio MeshConfig YAML for straitd (its --mesh): tracing, outboundTrafficPolicy, access logs, ...; a field Strait does not implement is refused by name before anything starts")
	cmd.Flags().BoolVar(&o.Prometheus, "prometheus", false, "also start a Prometheus (Debian's prometheus binary) that scrapes every pod's agent and straitd, on 127.0.0.1")
	cmd.Flags().BoolVar(&o.DNSCapture, "dns-capture", false,
		"capture each pod's DNS to its sidecar agent (ISTIO_META_DNS_CAPTURE): mesh names resolve to their VIPs from straitd's name table; "+
			"other names are forwarded to port 53 of the bridge's host address (see --dns-upstream)")
	cmd.Flags().StringSliceVar(&o.DNSUpstreams, "dns-upstream", nil,
		"with --dns-capture, the resolvers (host or host:port, comma-separated) that answer the names outside the mesh: up serves DNS on port 53 "+
			"of the bridge's host address and forwards there (default: the nameservers of this host's /etc/resolv.conf); "+
			"\"none\" serves nothing there, so those names get SERVFAIL at once (or run your own DNS server on that address)")
	addStateDirFlag(cmd, &o.StateDir)
	return cmd
}

func addStateDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "state-dir", defaultStateDir, "where a running local up keeps its state (for exec and status)")
}

func runUp(ctx context.Context, out io.Writer, o upOptions) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("the local mesh creates network namespaces and iptables rules: run as root")
	}
	for _, d := range []*string{&o.ConfigDir, &o.BinDir} {
		if *d, err = filepath.Abs(*d); err != nil {
			return err
		}
	}
	var straitdArgs []string
	if o.MeshConfig != "" {
		if o.MeshConfig, err = filepath.Abs(o.MeshConfig); err != nil {
			return err
		}
		if _, err := meshconfig.Load(o.MeshConfig); err != nil {
			return fmt.Errorf("--mesh-config: %w", err)
		}
		straitdArgs = []string{"--mesh", o.MeshConfig}
	}
	plan, err := localmesh.PlanUserConfig(o.ConfigDir)
	if err != nil {
		return err
	}
	for _, w := range plan.Workloads {
		if len(w.App) > 0 && !strings.Contains(w.App[0], "/") {
			if _, err := os.Stat(filepath.Join(o.BinDir, w.App[0])); err != nil {
				if p, perr := exec.LookPath(w.App[0]); perr == nil {
					w.App[0] = p
				} else {
					return fmt.Errorf("pod %s: app %q is neither in --bin-dir %s nor in PATH", w.Name, w.App[0], o.BinDir)
				}
			}
		}
	}
	var upstreams []string
	if o.DNSCapture {
		if upstreams, err = dnsUpstreams(o.DNSUpstreams, o.HostResolvConf); err != nil {
			return err
		}
	} else if len(o.DNSUpstreams) > 0 {
		return errors.New("--dns-upstream needs --dns-capture: without it the pods ask their own resolvers, not the mesh")
	}
	lock, err := lockState(o.StateDir)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := lock.release(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	say("==> starting straitd on %s and %d pods on a bridge on %s", o.ConfigDir, len(plan.Workloads), plan.Subnet)
	start := time.Now()
	m, err := localmesh.Start(ctx, localmesh.Options{
		BinDir: o.BinDir, ConfigDir: o.ConfigDir, ServeConfigDir: true, Subnet: plan.Subnet,
		Workloads: plan.Workloads, SecureXDS: true, DNSCapture: o.DNSCapture, DNSUpstreams: upstreams, Logger: localmesh.ProgressLogger(out),
		StraitdArgs: straitdArgs,
	})
	if err != nil {
		// Start removed what it had made.
		var taken *netns.SubnetTakenError
		if errors.As(err, &taken) {
			return fmt.Errorf("the WorkloadEntries' addresses are in %s, but this host already routes %s (another local mesh, or an interface): give the WorkloadEntries spec.address values in a /24 no route covers (see ip route)",
				taken.Subnet, taken.Route)
		}
		return fmt.Errorf("start the mesh (everything made so far was removed): %w", err)
	}
	defer func() { //nolint:contextcheck // teardown runs after ctx is cancelled (Ctrl-C)
		say("==> stopping: removing processes, namespaces, bridge and iptables rules")
		if cerr := m.Close(); cerr != nil {
			err = errors.Join(err, cerr)
			return
		}
		say("    done: everything local up made is gone")
	}()
	st := &localState{PID: os.Getpid(), ConfigDir: o.ConfigDir, BinDir: o.BinDir, WorkDir: m.WorkDir(), MonitoringAddr: m.MonitoringAddr(), Bridge: m.Network().Bridge}
	for _, w := range plan.Workloads {
		p := m.Pod(w.Name)
		st.Pods = append(st.Pods, statePod{Name: w.Name, Namespace: w.Namespace, IP: p.IP, Netns: p.NetnsPath(),
			Labels: plan.Labels[w.Name], Ports: plan.Ports[w.Name], App: w.App, AppUID: p.AppUID(), ProxyUID: p.ProxyUID(), Gateway: w.Gateway, OutsideMesh: w.OutsideMesh})
	}
	if err := lock.write(st); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	say("==> mesh up in %s (each sidecar has a certificate for its namespace and serviceAccount; straitd monitoring on %s, logs in %s/logs)",
		time.Since(start).Round(time.Millisecond), m.MonitoringAddr(), m.WorkDir())
	printPods(out, st, "ready")
	say("\nMesh page (workload graph with rate, success rate and p99 per edge; each proxy's xDS sync state): http://%s%s", m.MonitoringAddr(), meshview.Path)
	printScrapeTargets(out, st)
	if o.Prometheus {
		stopProm, err := startPrometheus(ctx, out, m)
		if err != nil {
			return err
		}
		defer stopProm()
	}
	if len(plan.Gateways) > 0 {
		say("\nGateways, reachable from this host (strait-agent proxy router in the pod, no capture):")
		for _, name := range slices.Sorted(maps.Keys(plan.Gateways)) {
			for _, srv := range plan.Gateways[name] {
				say("  %s: %s", name, srv)
			}
		}
	}
	if plain := withoutTLSModeLabel(st); len(plain) > 0 {
		say("note: WorkloadEntries %s lack the label %s: %s; clients send them plaintext (auto mTLS, as in Istio, goes by that label): add it for mTLS",
			strings.Join(plain, ", "), tlsModeLabel, tlsModeValue)
	}
	first := st.Pods[0]
	for _, p := range st.Pods {
		if !p.Gateway && !p.OutsideMesh {
			first = p // a sidecar pod: its commands' traffic is captured
			break
		}
	}
	say("\nRun a command in a pod (its traffic goes through the pod's sidecar):")
	say("  straitctl local exec %s -n %s -- strait-echo get http://HOST:PORT/", first.Name, first.Namespace)
	say("  straitctl local exec %s -n %s -- curl -s http://HOST:PORT/", first.Name, first.Namespace)
	say("Edit the YAML in %s and straitd applies it live. Ctrl-C removes the mesh.", o.ConfigDir)
	return watchUp(ctx, out, o, m, st)
}

// watchUp reports until ctx ends: edits of the config dir (straitd applies
// them itself; a WorkloadEntry change needs a restart, which it says) and
// processes of the mesh that exit.
func watchUp(ctx context.Context, out io.Writer, o upOptions, m *localmesh.Mesh, st *localState) error {
	exited := map[string]<-chan struct{}{}
	names := []string{"straitd"}
	for _, p := range st.Pods {
		names = append(names, p.Name+"-agent")
		if len(p.App) > 0 {
			names = append(names, p.Name+"-app")
		}
	}
	for _, n := range names {
		if ch, err := m.Exited(n); err == nil {
			exited[n] = ch
		}
	}
	seen := dirStamps(o.ConfigDir)
	tick := time.NewTicker(o.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, n := range names {
			if ch := exited[n]; ch != nil {
				select {
				case <-ch:
					fmt.Fprintf(out, "    %s exited (log: %s)\n", n, m.LogPath(n))
					delete(exited, n)
				default:
				}
			}
		}
		now := dirStamps(o.ConfigDir)
		if maps.Equal(now, seen) {
			continue
		}
		var changed []string
		for f, t := range now {
			if seen[f] != t {
				changed = append(changed, f)
			}
		}
		for f := range seen {
			if _, ok := now[f]; !ok {
				changed = append(changed, f+" (removed)")
			}
		}
		slices.Sort(changed)
		seen = now
		fmt.Fprintf(out, "    config changed: %s; straitd pushes it to the sidecars\n", strings.Join(changed, ", "))
		plan, err := localmesh.PlanUserConfig(o.ConfigDir)
		if err != nil {
			fmt.Fprintf(out, "    warning: %v\n", err)
			continue
		}
		if !samePods(plan, st) {
			fmt.Fprintln(out, "    warning: the WorkloadEntries changed (pods, addresses, labels or ports); local up made the pods at start: restart it to remake them")
		}
	}
}

// dirStamps maps each YAML file of dir to its size and modification time.
func dirStamps(dir string) map[string]string {
	stamps := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return stamps
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		if info, err := e.Info(); err == nil {
			stamps[e.Name()] = strconv.FormatInt(info.Size(), 10) + "@" + info.ModTime().String()
		}
	}
	return stamps
}

// samePods reports whether plan makes the pods st runs.
func samePods(plan *localmesh.UserPlan, st *localState) bool {
	if len(plan.Workloads) != len(st.Pods) {
		return false
	}
	for i, w := range plan.Workloads {
		p := st.Pods[i]
		if w.Name != p.Name || w.Namespace != p.Namespace || w.IP.String() != p.IP ||
			!maps.Equal(plan.Labels[w.Name], p.Labels) || !slices.Equal(plan.Ports[w.Name], p.Ports) {
			return false
		}
	}
	return true
}

// The label that tells clients (auto mTLS) that a workload has a sidecar.
const (
	tlsModeLabel = "security.istio.io/tlsMode"
	tlsModeValue = "istio"
)

// withoutTLSModeLabel lists the pods (NAMESPACE/NAME) whose WorkloadEntry
// does not say it has a sidecar.
func withoutTLSModeLabel(st *localState) []string {
	var out []string
	for _, p := range st.Pods {
		if p.Labels[tlsModeLabel] != tlsModeValue && !p.Gateway && !p.OutsideMesh { // a gateway serves no mesh traffic
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}

// printPods prints the pod table; sidecar is the SIDECAR column's value
// for every pod.
func printPods(out io.Writer, st *localState, sidecar string) {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tNAMESPACE\tADDRESS\tLABELS\tPORTS\tSIDECAR")
	for _, p := range st.Pods {
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
			labels = append(labels, k+"="+p.Labels[k])
		}
		ports := "-"
		if len(p.Ports) > 0 {
			ps := make([]string, len(p.Ports))
			for i, n := range p.Ports {
				ps[i] = strconv.Itoa(n)
			}
			ports = strings.Join(ps, ",")
		}
		l := strings.Join(labels, ",")
		if l == "" {
			l = "-"
		}
		sc := sidecar
		if p.OutsideMesh {
			sc = "none (outside the mesh)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Namespace, p.IP, l, ports, sc)
	}
	_ = tw.Flush()
}

func newExecCmd() *cobra.Command {
	var namespace, stateDir string
	cmd := &cobra.Command{
		Use:   "exec POD [-n NAMESPACE] -- CMD [ARGS...]",
		Short: "Run a command inside a pod of the running local mesh, as its app",
		Long: `exec runs CMD in the network namespace of POD of the mesh that
straitctl local up runs, as the pod's application does: as the pod's app
user (not its proxy's), so its connections are captured and go through the
pod's sidecar, and in a mount namespace where the mesh's work directory
shows only the pod's own directory (no other pod's secrets, no CA key).
CMD is looked up in PATH, then in local up's --bin-dir (strait-echo).
Names of ServiceEntry hosts with a VIP resolve to it inside the command
(an /etc/hosts of its own). exec exits with CMD's exit status. Needs root.`,
		Example: `  sudo straitctl local exec client -- strait-echo get -n 10 http://echo.demo.svc.cluster.local/
  sudo straitctl local exec client -n demo -- curl -s http://240.240.0.10/`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("want POD -- CMD [ARGS...], e.g. straitctl local exec client -- curl -s http://240.240.0.10/")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := readState(stateDir)
			if err != nil {
				return err
			}
			pod, err := st.findPod(args[0], namespace)
			if err != nil {
				return err
			}
			return runExec(cmd.Context(), st, pod, args[1:], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace (needed only when the name is in several)")
	addStateDirFlag(cmd, &stateDir)
	return cmd
}

// exitError carries a command's exit status out of straitctl.
type exitError struct{ code int }

func (e *exitError) Error() string { return "exit status " + strconv.Itoa(e.code) }

func runExec(ctx context.Context, st *localState, pod *statePod, argv []string, in io.Reader, out, errOut io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("exec enters a pod's network namespace: run as root")
	}
	bin := argv[0]
	if !strings.Contains(bin, "/") {
		if p, err := exec.LookPath(bin); err == nil {
			bin = p
		} else if p := filepath.Join(st.BinDir, bin); fileExists(p) {
			bin = p
		} else {
			return fmt.Errorf("command %q is neither in PATH nor in %s", bin, st.BinDir)
		}
	}
	hosts, cleanup, err := hostsFile(st)
	if err != nil {
		return err
	}
	defer cleanup()
	// The pod's view (localmesh.PodView, as its app has), with the mesh's
	// names bound over /etc/hosts (as `ip netns exec` does with
	// /etc/netns/NAME/hosts) and, with --dns-capture, the pod's resolv.conf
	// over /etc/resolv.conf.
	podDir := filepath.Join(st.WorkDir, "pods", pod.Name)
	view := localmesh.PodView{WorkDir: st.WorkDir, PodDir: podDir, ProxyBinDir: filepath.Join(st.WorkDir, "bin"),
		Binds: []localmesh.Bind{{Source: hosts, Target: "/etc/hosts"}}}
	if rc := filepath.Join(podDir, "resolv.conf"); fileExists(rc) {
		view.Binds = append(view.Binds, localmesh.Bind{Source: rc, Target: "/etc/resolv.conf"})
	}
	args := []string{"--net=" + pod.Netns}
	if pod.AppUID != 0 {
		if b, bind := localmesh.AppBinary(st.WorkDir, bin); bind != nil {
			bin = b
			view.Binds = append(view.Binds, *bind)
		}
		args = append(args, "--setuid", strconv.Itoa(pod.AppUID), "--setgid", strconv.Itoa(pod.AppUID))
	}
	args = append(args, "--", bin)
	args = append(args, argv[1:]...)
	c := view.Wrap(exec.CommandContext(ctx, "nsenter", args...))
	c.Env = append(os.Environ(), "POD_NAME="+pod.Name, "POD_NAMESPACE="+pod.Namespace)
	c.Stdin, c.Stdout, c.Stderr = in, out, errOut
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return &exitError{code: ee.ExitCode()}
		}
		return fmt.Errorf("run %s in pod %s: %w", argv[0], pod.Name, err)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func newStatusCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:     "status",
		Short:   "Show the pods of the running local mesh and whether their sidecars have straitd's latest config",
		Example: `  sudo straitctl local status`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := readState(stateDir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "local mesh: pid %d, config %s, logs %s/logs\n\n", st.PID, st.ConfigDir, st.WorkDir)
			printPods(out, st, "started")
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			statuses, err := fetchSyncz(ctx, straitdFlags{addr: st.MonitoringAddr})
			if err != nil {
				return err
			}
			fmt.Fprintln(out)
			return printProxyStatus(out, statuses)
		},
	}
	addStateDirFlag(cmd, &stateDir)
	return cmd
}

// hostsFile writes the host's /etc/hosts plus a line per ServiceEntry VIP
// of the mesh's config (VIP HOST...) to a temporary file, for exec.
func hostsFile(st *localState) (path string, cleanup func(), err error) {
	base, err := os.ReadFile("/etc/hosts")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", nil, err
	}
	var b strings.Builder
	b.Write(base)
	if len(base) > 0 && base[len(base)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString("# the local mesh's ServiceEntry VIPs (straitctl local exec)\n")
	b.WriteString(serviceHostsLines(st.ConfigDir))
	f, err := os.CreateTemp("", "strait-local-hosts-")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	if err := f.Chmod(0o644); err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), func() { os.Remove(f.Name()) }, nil
}

// serviceHostsLines is one hosts line per ServiceEntry of dir with a VIP:
// its first single address and its hosts (wildcards left out). Documents
// that do not load are left out too: local up reports them.
func serviceHostsLines(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		for _, c := range istioconfig.LoadFile(filepath.Join(dir, e.Name())).Configs {
			se, ok := c.Spec.(*networking.ServiceEntry)
			if !ok {
				continue
			}
			var vip string
			for _, a := range se.GetAddresses() {
				if ip, err := netip.ParseAddr(a); err == nil {
					vip = ip.String()
					break
				}
			}
			var hosts []string
			for _, h := range se.GetHosts() {
				if !strings.Contains(h, "*") {
					hosts = append(hosts, h)
				}
			}
			if vip != "" && len(hosts) > 0 {
				fmt.Fprintf(&b, "%s %s\n", vip, strings.Join(hosts, " "))
			}
		}
	}
	return b.String()
}

// dnsUpstreams turns --dns-upstream into the forwarder's upstreams
// (host:port): the flag's resolvers (port 53 unless given), none for
// "none", and without the flag the nameservers of the host's resolv.conf
// (a systemd-resolved stub at 127.0.0.53 included: the forwarder runs in
// the host's network namespace).
func dnsUpstreams(flag []string, hostResolvConf string) ([]string, error) {
	if len(flag) == 1 && flag[0] == "none" {
		return nil, nil
	}
	if len(flag) == 0 {
		rc, err := dns.ReadResolvConf(hostResolvConf)
		if err != nil {
			return nil, fmt.Errorf("--dns-capture forwards names outside the mesh to this host's resolvers: %w; name them with --dns-upstream HOST[:PORT], or --dns-upstream none", err)
		}
		if len(rc.Servers) == 0 {
			return nil, fmt.Errorf("--dns-capture forwards names outside the mesh to this host's resolvers, but %s has no nameserver line; name them with --dns-upstream HOST[:PORT], or --dns-upstream none", hostResolvConf)
		}
		return rc.Servers, nil
	}
	out := make([]string, 0, len(flag))
	for _, u := range flag {
		if u == "none" {
			return nil, errors.New(`--dns-upstream: "none" cannot be combined with resolvers`)
		}
		if ip, err := netip.ParseAddr(u); err == nil {
			out = append(out, netip.AddrPortFrom(ip, 53).String())
			continue
		}
		ap, err := netip.ParseAddrPort(u)
		if err != nil {
			return nil, fmt.Errorf("--dns-upstream %q: want an IP address with an optional port (1.1.1.1, 127.0.0.53:53, [::1]:5353)", u)
		}
		out = append(out, ap.String())
	}
	return out, nil
}
