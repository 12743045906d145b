package kubenode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/images"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/testreq"
)

const echoImage = "strait/strait-echo:test"

// echoTarball builds strait-echo (static) and writes it as the image
// echoImage into dir.
func echoTarball(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "strait-echo")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/straitmesh/strait/cmd/strait-echo")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build strait-echo: %v\n%s", err, out)
	}
	img, err := images.Build(images.Spec{
		Name:       "strait-echo",
		Files:      []images.File{{Path: images.BinDir + "/strait-echo", Src: bin, Mode: 0o755}},
		Entrypoint: []string{images.BinDir + "/strait-echo"},
		User:       "65534:65534",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "strait-echo.tar")
	if err := tarball.WriteToFile(path, name.MustParseReference(echoImage), img); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNodeRunsPod starts the one-node cluster, runs strait-echo as a pod
// scheduled by the scheduler and started by the kubelet through containerd
// and CNI, reaches it at its pod IP over the bridge, and checks that Stop
// leaves no shim, mount, bridge or directory behind.
func TestNodeRunsPod(t *testing.T) {
	// Pod network namespaces that exist before the node starts (left by
	// another node whose run was killed before its Stop) are not this
	// node's to remove.
	preexisting, _ := filepath.Glob("/var/run/netns/cni-*")
	node := Start(t, Options{Images: []string{echoTarball(t, t.TempDir())}})
	client := node.API.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	waitServiceAccount(ctx, t, client, "default")
	if _, err := client.CoreV1().Pods("default").Create(ctx, echoPod("echo", "echo"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPodReady(ctx, t, client, "default", "echo")
	if running.Spec.NodeName != node.Name {
		t.Errorf("pod scheduled to %q, want the node %q", running.Spec.NodeName, node.Name)
	}
	ip, err := netip.ParseAddr(running.Status.PodIP)
	if err != nil || !node.PodSubnet.Contains(ip) {
		t.Fatalf("pod IP %q is not in the node's pod subnet %s", running.Status.PodIP, node.PodSubnet)
	}

	// The host reaches the pod over the bridge, from the node's address.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + netip.AddrPortFrom(ip, 8080).String() + "/hello")
	if err != nil {
		t.Fatalf("GET the pod at %s: %v", ip, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var echo struct{ Version, Pod, Remote, Path string }
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatalf("pod answered %s: %q", resp.Status, body)
	}
	if echo.Version != "node-test" || echo.Pod != "echo" || echo.Path != "/hello" {
		t.Errorf("pod answered %+v, want version node-test, pod echo (downward API), path /hello", echo)
	}
	if remote, err := netip.ParseAddrPort(echo.Remote); err != nil || remote.Addr() != node.IP {
		t.Errorf("pod saw the request from %q, want the node's bridge address %s", echo.Remote, node.IP)
	}

	// Another pod reaches it through a Service's ClusterIP (kube-proxy),
	// by exec through the API server, the kubelet and containerd.
	svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clientPod := echoPod("client", "client")
	if _, err := client.CoreV1().Pods("default").Create(ctx, clientPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodReady(ctx, t, client, "default", "client")
	// kube-proxy programs the new Service a moment after its endpoints
	// are ready; until then the ClusterIP refuses connections.
	url := "http://" + svc.Spec.ClusterIP + "/via-service"
	for deadline := time.Now().Add(time.Minute); ; {
		out, _, err := node.Exec(ctx, "default", "client", "echo", "strait-echo", "get", url)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, `"status":200`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ClusterIP %s never answered from pod client: %s", svc.Spec.ClusterIP, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, _, err := node.Exec(ctx, "default", "client", "echo", "strait-echo", "get", "-n", "3", url)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("strait-echo get -n 3 printed %d lines:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var r struct {
			Status int
			Error  string
			Reply  struct{ Pod, Path string }
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if r.Status != 200 || r.Reply.Pod != "echo" || r.Reply.Path != "/via-service" {
			t.Errorf("request to the ClusterIP %s from pod client: %s; want 200 from pod echo", svc.Spec.ClusterIP, l)
		}
	}

	// The pod finds the Service by name through the node's cluster DNS:
	// the kubelet gave it the node's address as its nameserver and the
	// cluster search path.
	confs, _ := filepath.Glob(filepath.Join(node.Dir, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes", "*", "resolv.conf"))
	if len(confs) == 0 {
		t.Errorf("no pod resolv.conf under %s", node.Dir)
	}
	for _, f := range confs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"nameserver " + node.IP.String(), "search default.svc.cluster.local svc.cluster.local cluster.local"} {
			if !strings.Contains(string(data), want) {
				t.Errorf("pod resolv.conf %s lacks %q:\n%s", f, want, data)
			}
		}
	}
	for _, host := range []string{"echo", "echo.default", "echo.default.svc.cluster.local"} {
		out, _, err := node.Exec(ctx, "default", "client", "echo", "strait-echo", "get", "http://"+host+"/via-dns")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, `"status":200`) || !strings.Contains(out, `"pod":"echo"`) {
			t.Errorf("request to http://%s/ from pod client (cluster DNS): %s; want 200 from pod echo", host, out)
		}
	}
	// No upstream: a name outside the cluster domain does not resolve.
	out, _, err = node.Exec(ctx, "default", "client", "echo", "strait-echo", "get", "http://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, `"status":200`) || !strings.Contains(out, "lookup example.com") || !strings.Contains(out, "server misbehaving") {
		t.Errorf("request to http://example.com/ from pod client: %s; want a resolution error (the node DNS REFUSES names outside cluster.local: Go says \"server misbehaving\")", out)
	}

	// Stop removes everything the node made, pods first.
	bridge, dir, sock := node.network.Bridge, node.Dir, node.ContainerdSocket()
	created := node.createdHostPaths
	netnsBefore, _ := filepath.Glob("/var/run/netns/cni-*")
	netnsBefore = slices.DeleteFunc(netnsBefore, func(f string) bool { return slices.Contains(preexisting, f) })
	if len(netnsBefore) == 0 {
		t.Error("no pod network namespace of the node's own before Stop: the check below would check nothing")
	}
	apps := containerProcesses(t, "strait-echo")
	if len(apps) != 2 {
		t.Errorf("found %d strait-echo processes in containerd's cgroups, want 2 (pods echo and client)", len(apps))
	}
	if err := node.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if pids := killShims(sock); len(pids) > 0 {
		t.Errorf("containerd shims still running after Stop: %v", pids)
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) > 0 {
		t.Errorf("mounts left under %s after Stop: %v (%v)", dir, mounts, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("node directory %s still there after Stop (%v)", dir, err)
	}
	if out, err := exec.Command("ip", "link", "show", bridge).CombinedOutput(); err == nil {
		t.Errorf("bridge %s still there after Stop:\n%s", bridge, out)
	}
	for _, pid := range apps {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			t.Errorf("container process %d still running after Stop", pid)
		}
	}
	for _, p := range created {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("host path %s, created by the node, still there after Stop", p)
		}
	}
	for _, f := range netnsBefore {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("pod network namespace %s still there after Stop", f)
		}
	}
}

// containerProcesses returns the PIDs of the processes called name that
// run in a cgroup of containerd's CRI (/k8s.io/ID).
func containerProcesses(t *testing.T, name string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err1 := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		cg, err2 := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err1 == nil && err2 == nil && strings.TrimSpace(string(comm)) == name && strings.Contains(string(cg), "/k8s.io/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// echoPod is a strait-echo pod labelled app=APP.
func echoPod(name, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:  "echo",
				Image: echoImage,
				Args:  []string{"--addr", ":8080", "--version", "node-test"},
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1},
			}},
		},
	}
}

// waitServiceAccount waits for the controller manager to create the
// namespace's default service account (pods are refused without it).
func waitServiceAccount(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	for {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsNotFound(err) {
			t.Fatalf("get service account %s/default: %v", ns, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no service account %s/default: %v", ns, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitPodReady waits for the pod to be Running and Ready.
func waitPodReady(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, podName string) *corev1.Pod {
	t.Helper()
	var last string
	for {
		p, err := client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		if err == nil {
			last = fmt.Sprintf("phase %s, conditions %v, statuses %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
			if p.Status.Phase == corev1.PodRunning {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						return p
					}
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s/%s not ready: %s", ns, podName, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// TestStartContextLockTimeout: while another node holds the machine's
// lock, StartContext gives up when its context ends, with an error that
// names the lock, and leaves its own directory behind it cleaned up
// (before, its cleanup called Stop on the nil node it was returning).
func TestStartContextLockTimeout(t *testing.T) {
	testreq.Privileged(t, "the node lock of a real Kubernetes node")
	if err := Available(); err != nil {
		testreq.Missing(t, "no Kubernetes node: %v", err)
	}
	if _, err := kubeapiserver.BinDir(); err != nil {
		testreq.Missing(t, "no Kubernetes node binaries: %v", err)
	}
	holdCtx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	held, err := lockMachine(holdCtx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "strait-node-*"))
	ctx, cancelStart := context.WithTimeout(context.Background(), time.Second)
	defer cancelStart()
	n, err := StartContext(ctx, Options{Progress: io.Discard})
	if err == nil || n != nil {
		t.Fatalf("StartContext with the lock held: node %v, err %v; want no node and an error", n, err)
	}
	if !strings.Contains(err.Error(), "node lock") {
		t.Errorf("err %v, want it to name the node lock", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "strait-node-*"))
	if len(after) > len(before) {
		t.Errorf("StartContext left its directory: before %v, after %v", before, after)
	}
}
