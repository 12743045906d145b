package localmesh

// The three steps of a pod's start (startPod): its capture rules, its app
// and its agent.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/promscrape"
)

// capture installs the pod's capture rules (strait-agent iptables), as
// root; nothing for a gateway or a pod outside the mesh.
func (m *Mesh) capture(ctx context.Context, p *Pod, resolvConf string) error {
	if p.Gateway || p.OutsideMesh {
		return nil
	}
	captureArgs := []string{"iptables", "-p", "15001", "-z", "15006", "-u", strconv.Itoa(p.proxyUID), "-g", strconv.Itoa(p.proxyUID), "-m", m.opts.InterceptionMode,
		"-i", "*", "-x", "", "-b", "*", "-d", excludedInbound(p.ExcludeInboundPorts)}
	if m.opts.DNSCapture {
		captureArgs = append(captureArgs, "--redirect-dns")
	}
	capture := withResolvConf(p.pod.Command(ctx, netns.ExecOptions{}, filepath.Join(m.opts.BinDir, "strait-agent"), captureArgs...), resolvConf)
	if out, err := capture.CombinedOutput(); err != nil {
		return fmt.Errorf("strait-agent iptables: %w\n%s", err, out)
	}
	return nil
}

// startApp writes the pod's files and starts its app, if it has one.
func (m *Mesh) startApp(ctx context.Context, p *Pod, view PodView) error {
	podDir := strings.NewReplacer("{{POD_DIR}}", p.dir)
	for name, content := range p.Files {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(podDir.Replace(content)), 0o644); err != nil {
			return err
		}
	}
	if len(p.App) > 0 {
		args := make([]string, len(p.App))
		for i, a := range p.App {
			args[i] = podDir.Replace(a)
		}
		bin := args[0]
		if !strings.Contains(bin, "/") {
			bin = filepath.Join(m.opts.BinDir, bin)
		}
		appView := view
		if p.appUID != 0 {
			var bind *Bind
			if bin, bind = AppBinary(m.workDir, bin); bind != nil {
				appView.Binds = append(append([]Bind(nil), view.Binds...), *bind)
			}
		}
		id := netns.ExecOptions{UID: p.appUID, GID: p.appUID, Env: []string{"POD_NAME=" + p.Name}}
		app := appView.Wrap(p.pod.Command(context.WithoutCancel(ctx), id, bin, args[1:]...))
		if err := m.startLogged(app, p.Name+"-app"); err != nil {
			return err
		}
	}
	return nil
}

// startAgent starts the pod's agent: `proxy sidecar`, or `proxy router`
// for a gateway.
func (m *Mesh) startAgent(ctx context.Context, p *Pod, view PodView, discovery string) error {
	proxyConfig := fmt.Sprintf(`{"discoveryAddress":%q,"binaryPath":%q,"configPath":%q,"proxyAdminPort":15000,"statusPort":15020}`,
		discovery, filepath.Join(m.proxyBinDir, "strait-proxy"), filepath.Join(p.dir, "proxy"))
	env := []string{
		"POD_NAME=" + p.Name,
		"POD_NAMESPACE=" + p.Namespace,
		"INSTANCE_IP=" + p.IP,
		"SERVICE_ACCOUNT=" + p.serviceAccount(),
		"PROXY_CONFIG=" + proxyConfig,
		"ISTIO_META_WORKLOAD_NAME=" + p.Name,
		"ISTIO_META_INTERCEPTION_MODE=" + m.opts.InterceptionMode,
		"MINIMUM_DRAIN_DURATION=1s",
		"HOME=" + p.dir,
	}
	if m.opts.DNSCapture {
		env = append(env, "ISTIO_META_DNS_CAPTURE=true")
	}
	if len(p.Labels) > 0 {
		labels, err := json.Marshal(p.Labels)
		if err != nil {
			return err
		}
		env = append(env, "ISTIO_METAJSON_LABELS="+string(labels))
	}
	if p.AppMetrics != "" && !p.Gateway {
		env = append(env, promscrape.EnvVar+"="+p.AppMetrics)
	}
	env = append(env, m.opts.AgentEnv...)
	// The agent and the proxy run as the pod's proxy user. In TPROXY mode
	// the proxy needs CAP_NET_ADMIN for transparent sockets: Istio's
	// injector runs it as root in group 1337; here it keeps the pod's
	// user and gets that one capability (ambient, so that it passes from
	// the agent to the proxy), since root could read every pod's secrets.
	proxyType := "sidecar"
	if p.Gateway {
		proxyType = "router"
	}
	agentArgs := []string{filepath.Join(m.proxyBinDir, "strait-agent"), "proxy", proxyType, "--domain", p.Namespace + ".svc.cluster.local", "--concurrency", "1"}
	id := netns.ExecOptions{UID: p.proxyUID, GID: p.proxyUID, Env: env, Dir: p.dir}
	if m.opts.InterceptionMode == "TPROXY" {
		id.UID, id.GID = 0, 0
		agentArgs = append([]string{"setpriv", "--reuid", strconv.Itoa(p.proxyUID), "--regid", strconv.Itoa(p.proxyUID), "--clear-groups",
			"--inh-caps", "+net_admin", "--ambient-caps", "+net_admin", "--"}, agentArgs...)
	}
	agent := view.Wrap(p.pod.Command(context.WithoutCancel(ctx), id, agentArgs[0], agentArgs[1:]...))
	return m.startLogged(agent, p.Name+"-agent")
}
