package localmesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/netns"
)

// Options says where the binaries and the config are and where output goes.
type Options struct {
	// BinDir holds straitd, strait-agent, strait-proxy and strait-echo.
	BinDir string
	// ConfigDir is the source directory of Istio YAML. Its files are copied
	// into the mesh's own config directory, with the placeholder addresses
	// of the workloads replaced by the addresses the pods really have.
	ConfigDir string
	// ServeConfigDir makes straitd watch ConfigDir itself instead of a
	// rewritten copy: the workloads then have fixed addresses (Workload.IP)
	// in Subnet, as the config names them, and edits to ConfigDir reach
	// straitd directly (straitctl local up).
	ServeConfigDir bool
	// Subnet is the bridge's /24 when the workloads have fixed addresses;
	// zero picks a free random one.
	Subnet netip.Prefix
	// Workloads are the pods to create, in order.
	Workloads []Workload
	// InterceptionMode is how inbound traffic is captured: "REDIRECT"
	// (default; the application sees connections from 127.0.0.6) or
	// "TPROXY" (the application sees the client's own address).
	InterceptionMode string
	// SecureXDS makes every sidecar use straitd's TLS port with a workload
	// identity, as a file-mode host would be set up: the mesh root at the
	// agent's ./var/run/secrets/istio/root-cert.pem and a token from
	// straitd's key (as straitctl token create makes it) at
	// ./var/run/secrets/tokens/istio-token, for the pod's namespace and
	// service account "default". The agents then get certificates and
	// serve SDS. Off: plaintext xDS, no certificates.
	SecureXDS bool
	// TokenTTL is the lifetime of those tokens (default 24h).
	TokenTTL time.Duration
	// DNSCapture turns on Istio's DNS capture in every pod, as
	// ISTIO_META_DNS_CAPTURE=true in proxyMetadata does: the capture step
	// gets --redirect-dns and the agent serves the pod's DNS on 15053. Each
	// pod then has its own resolv.conf (bind-mounted on /etc/resolv.conf
	// for the capture step, the app and the agent, as a pod's container has
	// its own) naming the bridge's host address (HostIP) as its nameserver
	// and the Kubernetes search list of its namespace; names outside the
	// mesh go to HostIP port 53: DNSUpstreams' forwarder, or else
	// whatever DNS server the caller runs there.
	DNSCapture bool
	// DNSUpstreams (host:port), with DNSCapture, makes the mesh serve DNS
	// on HostIP port 53 (UDP and TCP) from the host's network namespace
	// and forward every query to them in order, answering SERVFAIL when
	// none answers: the pods have no uplink, so this is how they reach the
	// host's resolvers. Empty: nothing of the mesh listens there (a query
	// the name table cannot answer is refused by the host, and the agent
	// answers SERVFAIL).
	DNSUpstreams []string
	// AgentEnv is added to every agent's environment (e.g. SECRET_TTL=10s).
	AgentEnv []string
	// StraitdArgs are added to straitd's command line (e.g. --mesh FILE).
	StraitdArgs []string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Workload is one pod of the local mesh.
type Workload struct {
	Name      string
	Namespace string
	// ConfigIP is the address the config's WorkloadEntry gives this pod; it is
	// rewritten to the pod's real address in the mesh's copy of the config.
	ConfigIP string
	// IP, when set, is the pod's own address (in Options.Subnet); ConfigIP
	// is then not used.
	IP netip.Addr
	// App is the application's command line (the first element is a binary
	// name in BinDir or a path); empty for a pod with no server. The text
	// {{POD_DIR}} in an argument is replaced by the pod's directory.
	App []string
	// AppPort, when set, is the port the app listens on inside the pod:
	// Start waits until it accepts connections, so that the first request
	// of a test does not race the app's start (0: not waited for).
	AppPort int
	// Files are written into the pod's directory before the app starts
	// (name → content, with {{POD_DIR}} replaced as in App).
	Files map[string]string
	// ServiceAccount is the pod's service account, in its SPIFFE identity
	// (default ServiceAccount).
	ServiceAccount string
	// AppAsRoot runs the app as root instead of the pod's own app user
	// (AppUIDBase plus the last octet of its address). It still runs in
	// the pod's mount namespace, but root can undo that: only for apps
	// that are trusted with the host.
	AppAsRoot bool
	// ExcludeInboundPorts are left out of inbound capture, as the
	// traffic.sidecar.istio.io/excludeInboundPorts annotation does:
	// connections to them reach the pod's own sockets (a Sidecar ingress
	// listener with captureMode NONE).
	ExcludeInboundPorts []int
	// Gateway makes the pod a gateway, as a Kubernetes ingress gateway
	// pod is: its agent runs `strait-agent proxy router` (node type
	// router), nothing is captured, there is no app, and the proxy binds
	// the ports of the Gateways that select the pod's WorkloadEntry on
	// the pod's address, which the host reaches over the bridge.
	Gateway bool
	// OutsideMesh makes the pod a host outside the mesh (an external
	// service of a ServiceEntry, e.g. the far end of an egress gateway):
	// its own network namespace on the bridge and its app, with no
	// sidecar and no capture.
	OutsideMesh bool
	// AppMetrics is the agent's ISTIO_PROMETHEUS_ANNOTATIONS: the app's
	// metrics endpoint (JSON, Istio's scrape configuration) that the
	// agent merges into 15020's /stats/prometheus (appmetrics.go).
	AppMetrics string
	// Labels are the pod's labels (its WorkloadEntry's), given to the
	// agent as ISTIO_METAJSON_LABELS, as a Kubernetes pod's reach it
	// through the downward API: its node metadata, and so the app,
	// version and canonical-service labels of its istio_* metrics.
	Labels map[string]string
}

// serviceAccount is the workload's service account.
func (w *Workload) serviceAccount() string {
	if w.ServiceAccount == "" {
		return ServiceAccount
	}
	return w.ServiceAccount
}

// Pod is a running workload.
type Pod struct {
	Workload
	IP  string
	pod *netns.Pod
	dir string
	// proxyUID and appUID are the pod's users (podUIDs); appUID is 0 with
	// AppAsRoot.
	proxyUID, appUID int
}

// Mesh is a running local mesh. Close it to remove everything it made.
type Mesh struct {
	opts      Options
	log       *slog.Logger
	network   *netns.Network
	workDir   string
	configDir string
	xdsAddr   string
	// secureXDSAddr is straitd's TLS port (xDS and the CA).
	secureXDSAddr string
	// proxyBinDir holds the copies of strait-agent and strait-proxy that
	// the pods' proxy users run.
	proxyBinDir string
	monAddr     string
	pods        map[string]*Pod
	procs       []process
	replace     *strings.Replacer
	// stopDNS stops the DNS forwarder (DNSUpstreams) and waits for it;
	// nil when there is none.
	stopDNS func() error
}

// Start creates the network, the pods and straitd, captures each pod's
// traffic, starts the sidecars and the apps, and waits until every sidecar
// is ready.
func Start(ctx context.Context, opts Options) (m *Mesh, err error) {
	if err := netns.Available(); err != nil {
		return nil, err
	}
	for _, b := range []string{"straitd", "strait-agent", "strait-proxy"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("binary %s not found in %s (run `make build`): %w", b, opts.BinDir, err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch opts.InterceptionMode {
	case "":
		opts.InterceptionMode = "REDIRECT"
	case "REDIRECT", "TPROXY":
	default:
		return nil, fmt.Errorf("interception mode %q: want REDIRECT or TPROXY", opts.InterceptionMode)
	}
	mesh := &Mesh{opts: opts, log: log, pods: map[string]*Pod{}}
	m = mesh
	defer func() { //nolint:contextcheck // cleanup must run even when ctx was cancelled
		// On failure the named result is already nil: close what was made
		// through the local.
		if err != nil {
			mesh.Close()
		}
	}()
	sweepStale(ctx, os.TempDir(), log)
	m.workDir, err = os.MkdirTemp("", "strait-mesh-")
	if err != nil {
		return nil, err
	}
	owner, err := procLine(os.Getpid())
	if err != nil {
		return nil, err
	}
	if err := appendLine(m.workDir, ownerFile, owner); err != nil {
		return nil, err
	}
	// Only root walks into the work dir (MkdirTemp makes it 0700): the
	// pods reach their own directories through their mount namespaces'
	// views (isolation.go), on the stage directory made here.
	if err := os.Mkdir(filepath.Join(m.workDir, stageDir), 0o755); err != nil {
		return nil, err
	}
	// The agent and the proxy run as the pod's proxy user, which may not
	// be able to reach BinDir (a checkout under a private home or temp
	// directory): run copies from the work dir.
	m.proxyBinDir = filepath.Join(m.workDir, "bin")
	for _, b := range []string{"strait-agent", "strait-proxy"} {
		if err := copyExecutable(filepath.Join(opts.BinDir, b), filepath.Join(m.proxyBinDir, b)); err != nil {
			return nil, err
		}
	}
	m.network, err = netns.NewNetwork(ctx, netns.NetworkOptions{Prefix: "strait", Subnet: opts.Subnet})
	if err != nil {
		return nil, fmt.Errorf("create network: %w", err)
	}
	if err := appendLine(m.workDir, networkFile, m.network.Bridge+" strait-"+m.network.RunID+"-\n"); err != nil {
		return nil, err
	}
	log.Info("network ready", "bridge", m.network.Bridge, "subnet", m.network.Subnet.String(), "host", m.network.HostIP.String())
	if opts.DNSCapture && len(opts.DNSUpstreams) > 0 {
		if m.stopDNS, err = startDNSForwarder(ctx, m.network.HostIP, opts.DNSUpstreams, log); err != nil {
			return nil, err
		}
	}

	var pairs []string
	for _, w := range opts.Workloads {
		var p *netns.Pod
		if w.IP.IsValid() {
			p, err = m.network.AddPodAt(ctx, w.Name, w.IP)
		} else {
			p, err = m.network.AddPod(ctx, w.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("create pod %s: %w", w.Name, err)
		}
		proxyUID, appUID := podUIDs(p.IP)
		if w.AppAsRoot {
			appUID = 0
		}
		m.pods[w.Name] = &Pod{Workload: w, IP: p.IP.String(), pod: p, proxyUID: proxyUID, appUID: appUID}
		if w.ConfigIP != "" {
			pairs = append(pairs, w.ConfigIP, p.IP.String())
		}
	}
	m.replace = strings.NewReplacer(pairs...)

	if opts.ServeConfigDir {
		m.configDir = opts.ConfigDir
	} else {
		m.configDir = filepath.Join(m.workDir, "config")
		if err := os.MkdirAll(m.configDir, 0o755); err != nil {
			return nil, err
		}
		if err := m.copyConfig(); err != nil {
			return nil, err
		}
	}
	if err := m.startStraitd(ctx); err != nil {
		return nil, err
	}
	for _, w := range opts.Workloads {
		if err := m.startPod(ctx, m.pods[w.Name]); err != nil {
			return nil, fmt.Errorf("pod %s: %w", w.Name, err)
		}
	}
	for _, w := range opts.Workloads {
		start := time.Now()
		if err := m.waitReady(ctx, m.pods[w.Name]); err != nil {
			return nil, fmt.Errorf("pod %s: sidecar not ready: %w\n%s", w.Name, err, m.logTail(w.Name+"-agent"))
		}
		log.Info("sidecar ready", "pod", w.Name, "ip", m.pods[w.Name].IP, "after", time.Since(start).Round(time.Millisecond))
	}
	return m, nil
}

// Pod returns the named pod, or nil.
func (m *Mesh) Pod(name string) *Pod { return m.pods[name] }

// ConfigDir is the directory straitd watches.
func (m *Mesh) ConfigDir() string { return m.configDir }

// XDSAddr is where straitd serves xDS.
func (m *Mesh) XDSAddr() string { return m.xdsAddr }

// SecureXDSAddr is where straitd serves xDS and the CA over TLS.
func (m *Mesh) SecureXDSAddr() string { return m.secureXDSAddr }

// CADir is straitd's --ca-dir: root-cert.pem and the token key.
func (m *Mesh) CADir() string { return filepath.Join(m.workDir, "ca") }

// WorkDir holds the mesh's logs, pod directories and CA state.
func (m *Mesh) WorkDir() string { return m.workDir }

// MonitoringAddr is where straitd serves /metrics and /debug.
func (m *Mesh) MonitoringAddr() string { return m.monAddr }

// Network is the bridge the pods are on.
func (m *Mesh) Network() *netns.Network { return m.network }

// WriteConfig writes a file into straitd's config directory, with the
// workload placeholder addresses rewritten, atomically (write then rename).
// It returns before straitd has read the file: straitd debounces changes
// and pushes them to each sidecar in turn, so a caller that depends on the
// change waits for it where it is used (in the config dump of the proxy
// that applies it, or in the answers) before relying on it.
func (m *Mesh) WriteConfig(name string, data []byte) error {
	tmp := filepath.Join(m.configDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(m.replace.Replace(string(data))), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(m.configDir, name))
}

func (m *Mesh) copyConfig() error {
	entries, err := os.ReadDir(m.opts.ConfigDir)
	if err != nil {
		return fmt.Errorf("read config dir: %w", err)
	}
	n := 0
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(m.opts.ConfigDir, e.Name()))
		if err != nil {
			return err
		}
		if err := m.WriteConfig(e.Name(), data); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("config dir %s has no *.yaml or *.yml files", m.opts.ConfigDir)
	}
	return nil
}

func (m *Mesh) startStraitd(ctx context.Context) error {
	host := m.network.HostIP.String()
	xdsPort, err := freePort(host)
	if err != nil {
		return err
	}
	monPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	secureXDSPort, err := freePort(host)
	if err != nil {
		return err
	}
	m.xdsAddr = net.JoinHostPort(host, strconv.Itoa(xdsPort))
	m.monAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(monPort))
	m.secureXDSAddr = net.JoinHostPort(host, strconv.Itoa(secureXDSPort))
	// The CA's state stays in the mesh's work dir (not straitd's default
	// /var/lib/straitd/ca), and the TLS port is a free one, so meshes run
	// side by side.
	args := append([]string{"--config-dir", m.configDir, "--xds-addr", m.xdsAddr, "--monitoring-addr", m.monAddr,
		"--secure-xds-addr", m.secureXDSAddr, "--ca-dir", m.CADir(), "--cacerts-dir", ""}, m.opts.StraitdArgs...)
	cmd := exec.Command(filepath.Join(m.opts.BinDir, "straitd"), args...)
	if err := m.startLogged(cmd, "straitd"); err != nil {
		return err
	}
	// The TLS port listens once the CA's files exist (the pods' root and
	// tokens are made from them). straitd listens within milliseconds; the
	// wait is long for a machine that stalls (a neighbour's heavy I/O),
	// and ends at once if straitd exits.
	exited := m.procs[len(m.procs)-1].done
	if err := waitFor(ctx, 60*time.Second, func() error {
		select {
		case <-exited:
			return errExited
		default:
		}
		for _, addr := range []string{m.xdsAddr, m.secureXDSAddr} {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	}); err != nil {
		return fmt.Errorf("straitd did not listen on %s: %w\n%s", m.xdsAddr, err, m.logTail("straitd"))
	}
	m.log.Info("straitd serving", "xds", m.xdsAddr, "monitoring", m.monAddr, "config", m.configDir)
	return nil
}

func (m *Mesh) startPod(ctx context.Context, p *Pod) error {
	p.dir = filepath.Join(m.workDir, "pods", p.Name)
	if err := os.MkdirAll(filepath.Join(p.dir, "proxy"), 0o755); err != nil {
		return err
	}
	discovery := m.xdsAddr
	if m.opts.SecureXDS {
		if err := m.writeIdentity(p); err != nil {
			return err
		}
		discovery = m.secureXDSAddr
	}
	if p.Gateway {
		if err := copyCredentials(m.opts.ConfigDir, p); err != nil { // gateway.go
			return err
		}
	}
	if err := preparePod(ctx, p, m.opts.SecureXDS); err != nil { // isolation.go
		return err
	}
	view := PodView{WorkDir: m.workDir, PodDir: p.dir, ProxyBinDir: m.proxyBinDir}
	resolvConf := ""
	if m.opts.DNSCapture {
		resolvConf = filepath.Join(p.dir, "resolv.conf")
		content := fmt.Sprintf("search %s.svc.cluster.local svc.cluster.local cluster.local\nnameserver %s\noptions ndots:5\n",
			p.Namespace, m.network.HostIP)
		if err := os.WriteFile(resolvConf, []byte(content), 0o644); err != nil {
			return err
		}
	}
	// 1. Capture, as root, before anything else runs in the pod (the
	// init container's job); a gateway captures nothing.
	if err := m.capture(ctx, p, resolvConf); err != nil {
		return err
	}
	if resolvConf != "" {
		view.Binds = append(view.Binds, Bind{Source: resolvConf, Target: "/etc/resolv.conf"})
	}
	// 2. The application, as the pod's app user (never its proxy's), in
	// the pod's view.
	// Long-running processes live as long as the mesh, not as the caller's
	// context: Close stops them.
	if err := m.startApp(ctx, p, view); err != nil {
		return err
	}
	// 3. The agent, which writes the bootstrap and starts strait-proxy.
	if p.OutsideMesh {
		return nil
	}
	return m.startAgent(ctx, p, view, discovery)
}

// withResolvConf makes cmd (an nsenter command line) run in a private
// mount namespace where path is bind-mounted on /etc/resolv.conf: the
// pod's own resolv.conf. An empty path leaves cmd as it is. The wrapper
// execs, so the process keeps cmd's pid and process group.
func withResolvConf(cmd *exec.Cmd, path string) *exec.Cmd {
	if path == "" {
		return cmd
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		cmd.Err = fmt.Errorf("DNS capture needs unshare (util-linux) for the pod's resolv.conf: %w", err)
		return cmd
	}
	cmd.Args = append([]string{"unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$0" /etc/resolv.conf && exec "$@"`, path}, cmd.Args...)
	cmd.Path = unshare
	return cmd
}

// HostIP is the bridge's host address, reachable from every pod; straitd
// listens there, and with DNSCapture it is the pods' nameserver.
func (m *Mesh) HostIP() netip.Addr { return m.network.HostIP }

func (m *Mesh) waitReady(ctx context.Context, p *Pod) error {
	if p.AppPort != 0 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.AppPort))
		if err := waitFor(ctx, 30*time.Second, func() error {
			c, err := p.DialContext(ctx, "tcp", addr)
			if err != nil {
				return fmt.Errorf("app on %s: %w", addr, err)
			}
			return c.Close()
		}); err != nil {
			return err
		}
	}
	if p.OutsideMesh {
		return nil // no sidecar
	}
	client := p.HTTPClient()
	return waitFor(ctx, 30*time.Second, func() error {
		resp, err := client.Get("http://127.0.0.1:15021/healthz/ready")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz/ready: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	})
}

// ProxyUID is the user (and group) the pod's agent and proxy run as.
func (p *Pod) ProxyUID() int { return p.proxyUID }

// AppUID is the user (and group) the pod's app runs as: 0 with AppAsRoot.
func (p *Pod) AppUID() int { return p.appUID }

// appGID is the group of the pod's app, which may write in the pod's
// directory.
func (p *Pod) appGID() int { return p.appUID }

// NetnsPath is the pod's network namespace (for nsenter --net=).
func (p *Pod) NetnsPath() string { return p.pod.NetnsPath() }

// Dir is the pod's own directory (logs and files of its app and sidecar).
func (p *Pod) Dir() string { return p.dir }

// DialContext dials from inside the pod's network namespace, as the pod's
// application would (so the connection is captured by the pod's rules).
func (p *Pod) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return p.pod.DialContext(ctx, network, addr)
}

// Command returns a command that runs inside the pod's network namespace.
func (p *Pod) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return p.pod.Command(ctx, netns.ExecOptions{}, name, args...)
}

// HTTPClient returns a client whose connections are made inside the pod's
// network namespace, as the pod's application would make them (so they are
// captured by the pod's rules).
func (p *Pod) HTTPClient() *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:         p.pod.DialContext,
			MaxIdleConnsPerHost: 8,
			DisableCompression:  true,
		},
	}
}

// NewHTTPClient is HTTPClient with keep-alive disabled: every request is a
// new connection through the capture rules.
func (p *Pod) NewHTTPClient(keepAlive bool) *http.Client {
	c := p.HTTPClient()
	c.Transport.(*http.Transport).DisableKeepAlives = !keepAlive
	return c
}

func (m *Mesh) startLogged(cmd *exec.Cmd, name string) error {
	logDir := filepath.Join(m.workDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	m.procs = append(m.procs, process{name: name, cmd: cmd, done: done})
	if err := m.recordProcess(cmd.Process.Pid); err != nil {
		m.log.Warn("a killed test would leave this process running", "process", name, "error", err)
	}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	return nil
}

// process is a started command and a channel closed once it has exited.
type process struct {
	name string // as in LogPath
	cmd  *exec.Cmd
	done chan struct{}
}

func (m *Mesh) process(name string) (process, error) {
	for _, p := range m.procs {
		if p.name == name {
			return p, nil
		}
	}
	return process{}, fmt.Errorf("no process %q in the mesh (want straitd, POD-agent or POD-app)", name)
}

// Signal sends sig to one process of the mesh (named as in LogPath), not
// to its process group: as the kubelet signals a container's first
// process, so that an agent gets SIGTERM and its proxy does not.
func (m *Mesh) Signal(name string, sig os.Signal) error {
	p, err := m.process(name)
	if err != nil {
		return err
	}
	return p.cmd.Process.Signal(sig)
}

// PID is the process id of one process of the mesh (named as in
// LogPath): the first process of the pod's app or agent, in the pod's
// network and mount namespaces.
func (m *Mesh) PID(name string) (int, error) {
	p, err := m.process(name)
	if err != nil {
		return 0, err
	}
	return p.cmd.Process.Pid, nil
}

// Exited returns a channel closed once the named process has exited.
func (m *Mesh) Exited(name string) (<-chan struct{}, error) {
	p, err := m.process(name)
	if err != nil {
		return nil, err
	}
	return p.done, nil
}

// LogPath is the file that holds the output of a process of the mesh
// ("straitd", "POD-agent", "POD-app").
func (m *Mesh) LogPath(name string) string { return filepath.Join(m.workDir, "logs", name+".log") }

func (m *Mesh) logTail(name string) string {
	data, err := os.ReadFile(m.LogPath(name))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "--- last lines of " + name + " ---\n" + strings.Join(lines, "\n")
}

// Close stops every process and removes the pods, the bridge and the work
// directory. It is safe to call more than once.
func (m *Mesh) Close() error {
	if m == nil {
		return nil
	}
	// SIGTERM to every process group (agents stop their proxies), then
	// SIGKILL what is still running after a grace period.
	for _, p := range m.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	grace := time.After(3 * time.Second)
	for _, p := range m.procs {
		select {
		case <-p.done:
		case <-grace:
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	m.procs = nil
	var errs []error
	if m.stopDNS != nil {
		errs = append(errs, m.stopDNS())
		m.stopDNS = nil
	}
	if m.network != nil {
		errs = append(errs, m.network.Close())
		m.network = nil
	}
	if m.workDir != "" && os.Getenv("STRAIT_KEEP_WORKDIR") == "" {
		errs = append(errs, os.RemoveAll(m.workDir))
		m.workDir = ""
	} else if m.workDir != "" {
		// Kept for reading: without an owner, no later Start sweeps it.
		_ = os.Remove(filepath.Join(m.workDir, ownerFile))
	}
	return errors.Join(errs...)
}

// excludedInbound is the -d list of the capture rules: the agent's ports
// and the workload's own exclusions.
func excludedInbound(extra []int) string {
	ports := []string{"15090", "15021", "15020"}
	for _, p := range extra {
		ports = append(ports, strconv.Itoa(p))
	}
	return strings.Join(ports, ",")
}

// freePort returns a port free on host a moment ago, outside the kernel's
// ephemeral range (see internal/freeport): straitd binds it once started.
func freePort(host string) (int, error) {
	p, err := freeport.Port(host)
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	return p, nil
}

// copyExecutable copies a binary to dst (mode 0755), creating dst's directory.
func copyExecutable(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755) // WriteFile's mode is subject to the umask
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(path, uid, gid)
	})
}

// waitFor polls cond until it returns nil or the timeout passes.
// errExited, returned by a wait's condition, ends the wait at once: the
// process it waits for has exited.
var errExited = errors.New("the process exited")

func waitFor(ctx context.Context, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		} else if errors.Is(last, errExited) {
			return last
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", timeout, last)
		case <-tick.C:
		}
	}
}
