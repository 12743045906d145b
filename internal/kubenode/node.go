// Package kubenode runs a real one-node Kubernetes cluster for tests, on
// this machine only: the test API server of internal/kubeapiserver (etcd
// and kube-apiserver, listening on the node's bridge address), plus
// kube-controller-manager, kube-scheduler, kube-proxy (nftables mode, its
// own tables) and a kubelet (built from k8s.io/kubernetes by
// hack/kube-testenv-build.sh, one multi-call binary), driving its own
// containerd (Debian's, with runc) whose pods join a CNI bridge (Debian's
// bridge and host-local plugins) on a private /24 with no uplink and no
// route off the machine; pods route only the bridge's /24 and the
// ClusterIP range. Pods resolve Services through the node's cluster DNS
// server (ClusterDNS, in this process, on the bridge address), which
// answers only for cluster.local.
//
// Nothing is pulled: the pause image is built here from ./pause, and the
// images a test needs are imported from tarballs (`make images`).
//
// Everything the node makes lives under one temporary directory, one
// bridge and the processes it started; Stop (registered as the test's
// cleanup by Start) removes the pods through the CRI (which removes their
// network namespaces and veths), stops the daemons, deletes kube-proxy's
// tables, kills leftover shims and whatever still runs in the containers'
// cgroups, unmounts what is mounted under the directory, deletes the
// bridge, the directory and the few hard-coded host paths the node created
// (hostPaths). One node runs on a machine at a time: Start waits for
// another node's Stop (a file lock).
//
//	node := kubenode.Start(t, kubenode.Options{Images: []string{"bin/images/strait-echo.tar"}})
//	client := node.API.Client
package kubenode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/straitmesh/strait/internal/daemon"
	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// Options configure Start.
type Options struct {
	// Images are image tarballs (docker-save or OCI layout, as `make
	// images` writes) imported into the node's containerd before the
	// kubelet starts. Name them with a tag other than "latest" in pod
	// specs, or set imagePullPolicy: IfNotPresent: nothing can be pulled.
	Images []string
	// Progress receives start-up and teardown messages; nil means
	// os.Stderr (go test shows it live, unlike t.Log).
	Progress io.Writer
}

// Node is a running one-node cluster. Its exported fields are set by
// Start and read-only afterwards.
type Node struct {
	// API is the cluster's API server, with admin clients.
	API *kubeapiserver.Env
	// Name is the Node object's name.
	Name string
	// IP is the node's address: the CNI bridge's, reachable from every
	// pod; the kubelet listens on it.
	IP netip.Addr
	// PodSubnet is the bridge's /24; pods get addresses from its upper
	// half.
	PodSubnet netip.Prefix
	// Dir holds every file, socket and mount of the node; Stop removes it.
	Dir string

	binDir  string
	network *netns.Network
	out     io.Writer
	lock    *os.File // the machine-wide node lock, held until Stop
	// createdHostPaths are the hard-coded host paths that did not exist
	// before the node started; Stop removes them.
	createdHostPaths []string

	// mu guards the fields below.
	mu                                      sync.Mutex
	containerd, kubelet, controllers, sched *daemon.Process
	proxy                                   *daemon.Process
	stopped                                 bool
	// stopDNS ends the cluster DNS server and returns Run's error; nil
	// until it started.
	stopDNS func() error
}

// Available reports why this machine cannot run a node, or nil: it needs
// root, overlayfs, and containerd, runc, ctr, nft and the CNI plugins
// installed (scripts/install-deps.sh).
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("a Kubernetes node needs root (containerd, mounts, network namespaces)")
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed (Debian packages containerd, runc, nftables; scripts/install-deps.sh installs them): %w", bin, err)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			return fmt.Errorf("CNI plugin %s is missing in %s (Debian package containernetworking-plugins): %w", plugin, cniBinDir, err)
		}
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return err
	}
	if !strings.Contains(string(fs), "\toverlay\n") {
		return errors.New("the kernel has no overlay file system (containerd's overlayfs snapshotter needs it; try modprobe overlay)")
	}
	return netns.Available()
}

// Start starts a node with its API server for t, and tears both down when
// t ends (also when it fails). A machine that cannot run a node skips t (or
// fails it under STRAIT_REQUIRE_ALL), naming what is missing.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	testreq.Privileged(t, "a real Kubernetes node")
	if err := Available(); err != nil {
		testreq.Missing(t, "no Kubernetes node: %v", err)
	}
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	buildCtx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if _, err := kubeapiserver.NodeBinaries(buildCtx, opts.Progress); err != nil {
		if v := os.Getenv(kubeapiserver.EnvRequired); v == "1" || v == "true" {
			t.Fatalf("kubenode: %v", err)
		}
		testreq.Missing(t, "no Kubernetes node binaries: %v (run `make kube-testenv` to see the build fail or succeed)", err)
	}
	// Another node (a concurrent test run on a shared machine, e.g. a
	// conformance run) may hold the machine for long: the wait for it has
	// its own bound; start-up itself is bounded by StartContext.
	ctx, cancel2 := context.WithTimeout(context.Background(), lockWait)
	defer cancel2()
	n, err := StartContext(ctx, opts)
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubenode: logs in %s (tails):\n%s", n.Dir, n.logTails(15))
		}
		if err := n.Stop(); err != nil {
			t.Errorf("kubenode: stop: %v", err)
		}
	})
	return n
}

// lockWait bounds Start's wait for another node of the machine to stop.
const lockWait = 90 * time.Minute

// startTimeout bounds a node's start once it holds the machine.
const startTimeout = 5 * time.Minute

// StartContext is Start without a testing.TB: it does not build the
// binaries (call kubeapiserver.NodeBinaries first) and the caller must
// call Stop. ctx bounds the whole call, the wait for the machine lock
// included; the start after the lock is also bounded by startTimeout.
func StartContext(ctx context.Context, opts Options) (n *Node, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	binDir, err := kubeapiserver.BinDir()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// The lock before the directory: with the lock held, every other node
	// directory that got past it belongs to a dead process (sweepStale).
	lock, err := lockMachine(ctx, opts.Progress)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strait-node-")
	if err != nil {
		lock.Close()
		return nil, err
	}
	// The cleanup holds the node itself: a failed return sets n to nil
	// before deferred calls run.
	node := &Node{Dir: dir, binDir: binDir, out: opts.Progress, lock: lock}
	n = node
	defer func() { //nolint:contextcheck // cleanup must run even when ctx ran out
		if err != nil {
			_ = node.Stop()
		}
	}()
	sweepStale(os.TempDir(), dir, n.out) //nolint:contextcheck // the sweep has its own bound; a start-up ctx near its end must not leave half a sweep
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	n.createdHostPaths = missingHostPaths()
	// The bridge first: the API server listens on its address, which pods
	// reach.
	if n.network, err = podNetwork(ctx); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, bridgeFile), []byte(n.network.Bridge+"\n")); err != nil {
		return nil, err
	}
	n.Name = "strait-node-" + n.network.RunID
	n.IP = n.network.HostIP
	n.PodSubnet = n.network.Subnet
	if n.API, err = kubeapiserver.StartContext(ctx, kubeapiserver.Options{NodeIP: n.IP, Progress: opts.Progress}); err != nil {
		return nil, err
	}
	if err := n.startDNS(ctx); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx, opts.Images); err != nil {
		return nil, err
	}
	if err := n.startControlPlane(); err != nil {
		return nil, err
	}
	if err := n.startKubelet(); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if err := n.startKubeProxy([2]int{ports[0], ports[1]}); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(n.out, "kubenode: node %s Ready at %s in %v (dir %s)\n", n.Name, n.IP, time.Since(start).Round(time.Millisecond), dir)
	return n, nil
}

// podNetwork creates the node's bridge on a /24 outside the ClusterIP
// range (the netns package picks any free 10.X.Y.0/24, and pods route the
// ClusterIP range to the node).
func podNetwork(ctx context.Context) (*netns.Network, error) {
	for range 5 {
		nw, err := netns.NewNetwork(ctx, netns.NetworkOptions{Prefix: "kn"})
		if err != nil {
			return nil, err
		}
		if !nw.Subnet.Overlaps(kubeapiserver.ServiceCIDR) {
			return nw, nil
		}
		if err := nw.Close(); err != nil { //nolint:contextcheck // removing the unusable bridge must not depend on ctx
			return nil, err
		}
	}
	return nil, fmt.Errorf("no pod subnet outside the ClusterIP range %s after 5 tries", kubeapiserver.ServiceCIDR)
}

// startContainerd writes the CNI and containerd configs, starts
// containerd, waits for its CRI, and imports the pause image and images.
func (n *Node) startContainerd(ctx context.Context, imageTars []string) error {
	cdDir := filepath.Join(n.Dir, "containerd")
	cniConfDir := filepath.Join(n.Dir, "cni", "net.d")
	gateway := n.IP.String()
	conf, err := cniConfig(n.network.Bridge, n.PodSubnet.String(), gateway, kubeapiserver.ServiceCIDR.String(), filepath.Join(n.Dir, "cni", "ipam"))
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(cniConfDir, "10-strait.conflist"), conf); err != nil {
		return err
	}
	cfgPath := filepath.Join(cdDir, "config.toml")
	if err := writeFile(cfgPath, []byte(containerdConfig(cdDir, PauseImage, cniConfDir))); err != nil {
		return err
	}
	p, err := daemon.Start("containerd", "containerd", []string{"--config", cfgPath, "--log-level", "info"}, filepath.Join(n.Dir, "containerd.log"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.containerd = p
	n.mu.Unlock()
	conn, err := dialCRI(n.ContainerdSocket())
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := waitCRI(ctx, runtimeapi.NewRuntimeServiceClient(conn), p); err != nil {
		return err
	}
	pause, err := buildPauseImage(ctx, n.Dir)
	if err != nil {
		return err
	}
	for _, tar := range append([]string{pause}, imageTars...) {
		if err := importImage(ctx, n.ContainerdSocket(), tar); err != nil {
			return err
		}
	}
	fmt.Fprintf(n.out, "kubenode: containerd ready, %d images imported\n", 1+len(imageTars))
	return nil
}

// ContainerdSocket is the node's containerd socket (CRI and containerd
// API), for ctr --address.
func (n *Node) ContainerdSocket() string {
	return containerdSocket(filepath.Join(n.Dir, "containerd"))
}

// startControlPlane starts kube-controller-manager and kube-scheduler with
// the admin credentials, no leader election and no serving port.
func (n *Node) startControlPlane() error {
	kc := n.API.KubeconfigPath
	cm, err := daemon.Start("kube-controller-manager", filepath.Join(n.binDir, "kube-controller-manager"), []string{
		"--kubeconfig=" + kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--cluster-name=strait-test",
		// The kube-root-ca.crt ConfigMap in every namespace, which each
		// pod's projected service-account volume reads.
		"--root-ca-file=" + n.API.CAFile(),
		"--service-account-private-key-file=" + n.API.ServiceAccountKeyFile(),
		"--use-service-account-credentials=false",
		"--flex-volume-plugin-dir=" + filepath.Join(n.Dir, "flexvolume"),
		"--v=1",
	}, filepath.Join(n.Dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.controllers = cm
	n.mu.Unlock()
	sched, err := daemon.Start("kube-scheduler", filepath.Join(n.binDir, "kube-scheduler"), []string{
		"--kubeconfig=" + kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, filepath.Join(n.Dir, "kube-scheduler.log"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.sched = sched
	n.mu.Unlock()
	return nil
}

// kubeletConfig is the node's KubeletConfiguration (JSON is YAML).
func (n *Node) kubeletConfig(port, healthzPort int) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"address":                  n.IP.String(),
		"port":                     port,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              healthzPort,
		"containerRuntimeEndpoint": "unix://" + n.ContainerdSocket(),
		// containerd 1.6 does not report its cgroup driver (the CRI
		// RuntimeConfig call came with containerd 2); both use cgroupfs.
		"cgroupDriver": "cgroupfs",
		// No QoS cgroup tree of our own on a shared machine: pods get
		// containerd's cgroups, and the kubelet enforces no allocatable.
		"cgroupsPerQOS":          false,
		"enforceNodeAllocatable": []string{},
		"failSwapOn":             false,
		"failCgroupV1":           false,
		"podLogsDir":             filepath.Join(n.Dir, "pod-logs"),
		"volumePluginDir":        filepath.Join(n.Dir, "volume-plugins"),
		// Pods (dnsPolicy ClusterFirst) get only the node's DNS server
		// and the cluster search path, nothing of the host's resolv.conf.
		"resolvConf":          "",
		"clusterDNS":          []string{n.IP.String()},
		"clusterDomain":       ClusterDomain,
		"authentication":      map[string]any{"anonymous": map[string]any{"enabled": true}, "webhook": map[string]any{"enabled": false}},
		"authorization":       map[string]any{"mode": "AlwaysAllow"},
		"serializeImagePulls": false,
		// The node's images are imported from tarballs and cannot be
		// pulled again: nothing may garbage-collect them. On a shared
		// disk that is nearly full, the eviction manager's disk signals
		// would first delete every unused image (the pause image among
		// them) and then evict the pods and taint the node; at 0% a disk
		// signal never fires (kind's nodes do the same).
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":   "50Mi",
			"nodefs.available":   "0%",
			"nodefs.inodesFree":  "0%",
			"imagefs.available":  "0%",
			"imagefs.inodesFree": "0%",
		},
		"registerNode":              true,
		"nodeStatusReportFrequency": "10s",
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// startKubelet writes the kubelet's config and starts it.
func (n *Node) startKubelet() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	cfg, err := n.kubeletConfig(ports[0], ports[1])
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(n.Dir, "kubelet.json")
	if err := writeFile(cfgPath, cfg); err != nil {
		return err
	}
	root := filepath.Join(n.Dir, "kubelet")
	p, err := daemon.Start("kubelet", filepath.Join(n.binDir, "kubelet"), []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + n.API.KubeconfigPath,
		"--root-dir=" + root,
		"--cert-dir=" + filepath.Join(root, "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP.String(),
		"--v=2",
	}, filepath.Join(n.Dir, "kubelet.log"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.kubelet = p
	n.mu.Unlock()
	return nil
}

// waitReady waits for the Node object to report Ready, failing early when a
// daemon exits.
func (n *Node) waitReady(ctx context.Context) error {
	var last string
	for {
		n.mu.Lock()
		procs := []*daemon.Process{n.containerd, n.controllers, n.sched, n.kubelet, n.proxy}
		n.mu.Unlock()
		for _, p := range procs {
			if err := p.CheckRunning(); err != nil {
				return err
			}
		}
		node, err := n.API.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		default:
			last = "no Ready condition"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					if c.Status == corev1.ConditionTrue {
						return nil
					}
					last = fmt.Sprintf("Ready=%s: %s: %s", c.Status, c.Reason, c.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready (%s): %w; kubelet log %s:\n%s", n.Name, last, ctx.Err(), n.kubelet.LogPath, n.kubelet.LogTail(25))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logTails returns the tail of every daemon's log.
func (n *Node) logTails(lines int) string {
	n.mu.Lock()
	procs := []*daemon.Process{n.containerd, n.controllers, n.sched, n.kubelet, n.proxy}
	n.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		if p != nil {
			fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name, p.LogPath, p.LogTail(lines))
		}
	}
	dnsLog := filepath.Join(n.Dir, "cluster-dns.log")
	fmt.Fprintf(&b, "--- cluster DNS (%s)\n%s\n", dnsLog, daemon.FileTail(dnsLog, lines))
	return b.String()
}

// Stop tears the node down: the control-plane daemons, the kubelet and
// kube-proxy stop (kube-proxy's nftables tables are deleted), every pod sandbox is stopped and removed through the CRI,
// containerd stops, leftover shims are killed, mounts under Dir are
// detached, the cluster DNS server and the API server stop, and the
// bridge and Dir are removed. It may be called more than once.
func (n *Node) Stop() error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.stopped = true
	cd, kubelet, cm, sched, proxy, stopDNS := n.containerd, n.kubelet, n.controllers, n.sched, n.proxy, n.stopDNS
	n.mu.Unlock()

	var errs []error
	cm.Stop(10 * time.Second)
	sched.Stop(10 * time.Second)
	kubelet.Stop(15 * time.Second)
	if proxy != nil {
		proxy.Stop(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := removeKubeProxyTables(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	var ids, netnsFiles []string
	if cd != nil && !cd.Exited() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ids = containerIDs(ctx, n.ContainerdSocket())
		netnsFiles = netnsPaths(ctx, n.ContainerdSocket(), ids)
		cancel()
		if err := n.removePods(); err != nil {
			errs = append(errs, err)
		}
	}
	cd.Stop(15 * time.Second)
	if killed := killShims(n.ContainerdSocket()); len(killed) > 0 {
		fmt.Fprintf(n.out, "kubenode: killed %d leftover containerd shims %v\n", len(killed), killed)
	}
	// What the CRI teardown left running (none when it succeeded).
	if err := removeContainerCgroups(ids); err != nil {
		errs = append(errs, err)
	}
	if err := removeNetns(netnsFiles); err != nil {
		errs = append(errs, err)
	}
	if err := unmountAll(n.Dir); err != nil {
		errs = append(errs, err)
	}
	if stopDNS != nil {
		if err := stopDNS(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.API != nil {
		if err := n.API.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.network != nil {
		if err := n.network.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeHostPaths(n.Dir, n.createdHostPaths); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, err)
	}
	if n.lock != nil {
		n.lock.Close() // releases the flock
	}
	return errors.Join(errs...)
}

// removePods stops and removes every sandbox through containerd's CRI.
func (n *Node) removePods() error {
	conn, err := dialCRI(n.ContainerdSocket())
	if err != nil {
		return err
	}
	defer func(c *grpc.ClientConn) { _ = c.Close() }(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := removeSandboxes(ctx, runtimeapi.NewRuntimeServiceClient(conn)); err != nil {
		return fmt.Errorf("remove pods through the CRI: %w", err)
	}
	return nil
}

// freePorts returns count TCP ports on 127.0.0.1 that were free a moment
// ago, outside the kernel's ephemeral range (see internal/freeport): the
// kubelet and kube-proxy bind them once started.
func freePorts(count int) ([]int, error) {
	return freeport.Ports("127.0.0.1", count)
}

// startDNS starts the cluster DNS server on the node's address, port 53
// (UDP and TCP), where the kubelet's clusterDNS points every pod, and
// waits for its caches to sync. Its queries are logged to cluster-dns.log.
func (n *Node) startDNS(ctx context.Context) error { //nolint:contextcheck // the server runs until Stop, beyond the start-up ctx
	logFile, err := os.OpenFile(filepath.Join(n.Dir, "cluster-dns.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := NewClusterDNS(DNSOptions{
		Client: n.API.Client,
		Addr:   net.JoinHostPort(n.IP.String(), "53"),
		Domain: ClusterDomain,
		Logger: logger,
	})
	if err != nil {
		logFile.Close()
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- d.Run(runCtx)
		logFile.Close()
	}()
	n.mu.Lock()
	n.stopDNS = func() error {
		cancel()
		return <-done
	}
	n.mu.Unlock()
	select {
	case <-d.Ready():
		fmt.Fprintf(n.out, "kubenode: cluster DNS for %s on %s (udp, tcp)\n", ClusterDomain, d.Addr())
		return nil
	case err := <-done:
		done <- err // for stopDNS
		return err
	case <-ctx.Done():
		return fmt.Errorf("cluster DNS on %s not ready: %w", d.Addr(), ctx.Err())
	}
}
