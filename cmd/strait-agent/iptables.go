package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/iptables"
)

// iptablesDeps are the side effects of `strait-agent iptables`, replaced in
// tests.
type iptablesDeps struct {
	getenv func(string) string
	// system detects the iptables backend and returns what applying
	// changes, plus a line for the log saying which backend and why.
	system func(ctx context.Context) (iptables.System, string)
	// readFile reads /etc/resolv.conf for --redirect-dns.
	readFile func(string) ([]byte, error)
	// check runs --run-validation's probes.
	check func(ctx context.Context, cfg iptables.Config, opts iptables.CheckOptions) error
	now   func() time.Time
}

func newIptablesCmd() *cobra.Command {
	return iptablesCommand(iptablesDeps{
		getenv: os.Getenv,
		system: func(ctx context.Context) (iptables.System, string) {
			b, why := iptables.DetectBackend(ctx, nil)
			name := string(b)
			if name == "" {
				name = "default"
			}
			return b.System(nil), fmt.Sprintf("iptables backend: %s (%s)", name, why)
		},
		readFile: os.ReadFile,
		check:    iptables.CheckCapture,
		now:      time.Now,
	})
}

// iptablesFlags are the command's options besides the rule configuration.
type iptablesFlags struct {
	dryRun, cleanupOnly, runValidation, skipRuleApply bool
	probePort                                         uint16
	probeTimeout                                      time.Duration
}

// iptablesCommand is istio-iptables with the same flag names and
// environment defaults (istio 1.14). The environment is read once, here.
func iptablesCommand(deps iptablesDeps) *cobra.Command {
	var envErrs []error
	env := func(name, def string) string {
		if v, ok := lookup(deps.getenv, name); ok {
			return v
		}
		return def
	}
	envBool := func(name string) bool {
		v, ok := lookup(deps.getenv, name)
		if !ok {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			envErrs = append(envErrs, fmt.Errorf("environment variable %s=%q is not a boolean (true or false)", name, v))
		}
		return b
	}
	def := iptables.DefaultConfig()
	cfg := iptables.Config{}
	var fl iptablesFlags

	cmd := &cobra.Command{
		Use:   "iptables",
		Short: "Set up the iptables rules that capture the workload's traffic into the proxy (istio-iptables)",
		Long: "Script responsible for setting up port forwarding for Istio sidecar.\n\n" +
			"Writes the rules with one `iptables-restore --noflush` transaction per family (ip6tables-restore\n" +
			"with --dual-stack), through the backend (legacy or nft) the namespace's existing rules use;\n" +
			"running it again replaces the ISTIO_* chains and Strait's rules instead of adding copies.\n" +
			"TPROXY mode also sets up policy routing (ip rule/route, protocol 76). Without --dual-stack,\n" +
			"IPv6 is refused (ip6tables filter INPUT/OUTPUT: only loopback, established traffic and ICMPv6\n" +
			"pass), so that nothing reaches the app over IPv6 past the proxy. --cleanup-only removes\n" +
			"all of it. Needs NET_ADMIN in the target network namespace. With --dry-run it prints what it\n" +
			"would apply and changes nothing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := errors.Join(envErrs...); err != nil {
				return err
			}
			return runIptables(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), deps, cfg, fl)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.ProxyPort, "envoy-port", "p", env("ENVOY_PORT", def.ProxyPort),
		"Specify the envoy port to which redirect all TCP traffic (default $ENVOY_PORT = 15001)")
	f.StringVarP(&cfg.InboundCapturePort, "inbound-capture-port", "z", env("INBOUND_CAPTURE_PORT", def.InboundCapturePort),
		"Port to which all inbound TCP traffic to the pod/VM should be redirected to (default $INBOUND_CAPTURE_PORT = 15006)")
	f.StringVarP(&cfg.InboundTunnelPort, "inbound-tunnel-port", "e", env("INBOUND_TUNNEL_PORT", def.InboundTunnelPort),
		"Specify the istio tunnel port for inbound tcp traffic (default $INBOUND_TUNNEL_PORT = 15008)")
	f.StringVarP(&cfg.ProxyUID, "proxy-uid", "u", env("PROXY_UID", def.ProxyUID),
		"Specify the UID of the user for which the redirection is not applied (comma list; default $PROXY_UID = 1337)")
	f.StringVarP(&cfg.ProxyGID, "proxy-gid", "g", env("PROXY_GID", ""),
		"Specify the GID of the user for which the redirection is not applied (default $PROXY_GID, else the proxy UID)")
	f.StringVarP(&cfg.InboundInterceptionMode, "istio-inbound-interception-mode", "m",
		env("ISTIO_INBOUND_INTERCEPTION_MODE", env("INBOUND_INTERCEPTION_MODE", def.InboundInterceptionMode)),
		"The mode used to redirect inbound connections to Envoy, either \"REDIRECT\" or \"TPROXY\" ($ISTIO_INBOUND_INTERCEPTION_MODE)")
	f.StringVarP(&cfg.InboundTProxyMark, "inbound-tproxy-mark", "t", env("INBOUND_TPROXY_MARK", def.InboundTProxyMark),
		"Packet mark for TPROXY mode; the proxy's transparent upstream sockets must use it too ($INBOUND_TPROXY_MARK = 1337)")
	f.StringVarP(&cfg.InboundTProxyRouteTable, "inbound-tproxy-route-table", "r",
		env("ISTIO_INBOUND_TPROXY_ROUTE_TABLE", env("INBOUND_TPROXY_ROUTE_TABLE", def.InboundTProxyRouteTable)),
		"Route table for TPROXY mode ($ISTIO_INBOUND_TPROXY_ROUTE_TABLE = 133)")
	f.StringVarP(&cfg.OutboundIPRangesInclude, "istio-service-cidr", "i", env("ISTIO_SERVICE_CIDR", ""),
		"Comma separated list of IP ranges in CIDR form to redirect to envoy (optional). "+
			"\"*\" redirects all outbound traffic; empty disables all outbound redirection ($ISTIO_SERVICE_CIDR)")
	f.StringVarP(&cfg.OutboundIPRangesExclude, "istio-service-exclude-cidr", "x", env("ISTIO_SERVICE_EXCLUDE_CIDR", ""),
		"Comma separated list of IP ranges in CIDR form to be excluded from redirection ($ISTIO_SERVICE_EXCLUDE_CIDR)")
	f.StringVarP(&cfg.InboundPortsInclude, "istio-inbound-ports", "b", env("ISTIO_INBOUND_PORTS", ""),
		"Comma separated list of inbound ports for which traffic is to be redirected to Envoy. "+
			"\"*\" redirects all ports; empty disables inbound redirection ($ISTIO_INBOUND_PORTS)")
	f.StringVarP(&cfg.InboundPortsExclude, "istio-local-exclude-ports", "d", env("ISTIO_LOCAL_EXCLUDE_PORTS", ""),
		"Comma separated list of inbound ports to be excluded from redirection to Envoy (with -b '*') ($ISTIO_LOCAL_EXCLUDE_PORTS)")
	f.StringVarP(&cfg.OutboundPortsInclude, "istio-outbound-ports", "q", env("ISTIO_OUTBOUND_PORTS", ""),
		"Comma separated list of outbound ports to be explicitly included for redirection to Envoy ($ISTIO_OUTBOUND_PORTS)")
	f.StringVarP(&cfg.OutboundPortsExclude, "istio-local-outbound-ports-exclude", "o",
		env("ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE", ""),
		"Comma separated list of outbound ports to be excluded from redirection to Envoy ($ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE)")
	f.StringVarP(&cfg.KubeVirtInterfaces, "kube-virt-interfaces", "k", env("KUBE_VIRT_INTERFACES", env("KUBEVIRT_INTERFACES", "")),
		"Comma separated list of virtual interfaces whose inbound traffic (from VM) will be treated as outbound ($KUBE_VIRT_INTERFACES)")
	f.StringVarP(&cfg.ExcludeInterfaces, "istio-exclude-interfaces", "c", env("ISTIO_EXCLUDE_INTERFACES", ""),
		"Comma separated list of NIC (optional). Neither inbound nor outbound traffic will be captured ($ISTIO_EXCLUDE_INTERFACES)")
	f.BoolVar(&cfg.RedirectDNS, "redirect-dns", envBool("ISTIO_META_DNS_CAPTURE"),
		"Enable capture of dns traffic by istio-agent: port 53 to the resolvers in /etc/resolv.conf goes to "+
			iptables.DNSCapturePort+" ($ISTIO_META_DNS_CAPTURE)")
	f.BoolVar(&cfg.CaptureAllDNS, "capture-all-dns", envBool("CAPTURE_ALL_DNS"),
		"Instead of only capturing DNS traffic to the resolvers in /etc/resolv.conf, capture all port-53 traffic (with --redirect-dns) ($CAPTURE_ALL_DNS)")
	f.BoolVar(&cfg.DropInvalid, "drop-invalid", envBool("INVALID_DROP"),
		"Enable invalid drop in the iptables rules ($INVALID_DROP)")
	f.BoolVar(&cfg.DualStack, "dual-stack", envBool("ISTIO_DUAL_STACK"),
		"Also capture IPv6 traffic, with ip6tables; without it IPv6 is refused except on loopback ($ISTIO_DUAL_STACK)")
	f.BoolVarP(&fl.dryRun, "dry-run", "n", envBool("DRY_RUN"), "Print what would be applied to stdout and change nothing ($DRY_RUN)")
	f.BoolVar(&fl.cleanupOnly, "cleanup-only", envBool("CLEANUP_ONLY"),
		"Remove every chain, rule, ip rule and route a previous run made, and nothing else; apply nothing ($CLEANUP_ONLY)")
	f.BoolVar(&fl.runValidation, "run-validation", envBool("RUN_VALIDATION"),
		"After applying, check with probe connections that outbound and inbound traffic is really captured ($RUN_VALIDATION)")
	f.BoolVar(&fl.skipRuleApply, "skip-rule-apply", envBool("SKIP_RULE_APPLY"),
		"Do not apply the rules (e.g. the CNI plugin did); with --run-validation, only validate ($SKIP_RULE_APPLY)")
	probePort := uint16(15002)
	if v, ok := lookup(deps.getenv, "IPTABLES_PROBE_PORT"); ok {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			envErrs = append(envErrs, fmt.Errorf("environment variable IPTABLES_PROBE_PORT=%q is not a port number (1-65535)", v))
		}
		probePort = uint16(n)
	}
	f.Uint16Var(&fl.probePort, "iptables-probe-port", probePort,
		"Destination port of --run-validation's test connections when every port is captured ($IPTABLES_PROBE_PORT = 15002)")
	probeTimeout := 5 * time.Second
	if v, ok := lookup(deps.getenv, "PROBE_TIMEOUT"); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			envErrs = append(envErrs, fmt.Errorf("environment variable PROBE_TIMEOUT=%q is not a duration (e.g. 5s)", v))
		}
		probeTimeout = d
	}
	f.DurationVar(&fl.probeTimeout, "probe-timeout", probeTimeout, "Timeout of each --run-validation probe ($PROBE_TIMEOUT = 5s)")

	// Kept for the "Istio iptables environment" log block.
	envBlock := iptables.EnvironmentBlock(deps.getenv)
	cmd.PreRun = func(cmd *cobra.Command, _ []string) {
		logInfo(cmd.ErrOrStderr(), deps.now(), "Istio iptables environment:\n"+envBlock)
	}
	return cmd
}

func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func runIptables(ctx context.Context, stdout, stderr io.Writer, deps iptablesDeps, cfg iptables.Config, fl iptablesFlags) error {
	if cfg.RedirectDNS && !cfg.CaptureAllDNS && !fl.cleanupOnly {
		servers, err := resolvConfServers(deps.readFile, "/etc/resolv.conf")
		if err != nil {
			return fmt.Errorf("--redirect-dns: %w", err)
		}
		cfg.DNSServers = servers
	}
	logInfo(stderr, deps.now(), "Istio iptables variables:\n"+cfg.VariablesBlock())
	// Everything is validated before anything changes.
	plan, err := iptables.Build(cfg)
	if err != nil {
		return err
	}
	if fl.dryRun {
		if fl.cleanupOnly {
			_, err := io.WriteString(stdout, "# --cleanup-only: would remove every ISTIO_* chain, the jumps into them, "+
				"rules commented \""+iptables.OwnerComment+"\" (iptables and ip6tables), ip rules and routes with protocol "+iptables.RouteProtocol+" and ::6/128 on lo\n")
			return err
		}
		_, err := io.WriteString(stdout, plan.String())
		return err
	}
	if fl.cleanupOnly {
		sys, why := deps.system(ctx)
		logInfo(stderr, deps.now(), why)
		rep, err := iptables.Cleanup(ctx, sys)
		logReport(stderr, deps.now(), "Cleaned up", rep)
		return err
	}
	if !fl.skipRuleApply {
		sys, why := deps.system(ctx)
		logInfo(stderr, deps.now(), why)
		rep, err := iptables.Install(ctx, sys, plan)
		logReport(stderr, deps.now(), "Applied", rep)
		if err != nil {
			return err
		}
	}
	if fl.runValidation {
		if err := deps.check(ctx, cfg, iptables.CheckOptions{ProbePort: fl.probePort, Timeout: fl.probeTimeout}); err != nil {
			return err
		}
		logInfo(stderr, deps.now(), "Validation passed: outbound and inbound connections are captured")
	}
	return nil
}

func logReport(w io.Writer, now time.Time, what string, rep iptables.Report) {
	if s := rep.String(); s != "" {
		logInfo(w, now, what+":\n"+s)
	} else {
		logInfo(w, now, what+": nothing to change")
	}
}

// resolvConfServers returns the nameserver addresses of a resolv.conf.
func resolvConfServers(readFile func(string) ([]byte, error), path string) ([]string, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var servers []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "nameserver" {
			servers = append(servers, f[1])
		}
	}
	return servers, sc.Err()
}

// logInfo writes an istio-style log line ("TIMESTAMP\tinfo\tMESSAGE"); the
// multi-line blocks are meant to be read and diffed as istio-iptables prints them,
// which a structured handler would escape.
func logInfo(w io.Writer, now time.Time, msg string) {
	fmt.Fprintf(w, "%s\tinfo\t%s\n", now.UTC().Format("2006-01-02T15:04:05.000000Z"), msg)
}
