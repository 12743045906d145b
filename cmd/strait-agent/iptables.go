package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/iptables"
)

// iptablesDeps are the side effects of `strait-agent iptables`, replaced in
// tests.
type iptablesDeps struct {
	getenv func(string) string
	runner iptables.Runner
	now    func() time.Time
}

func newIptablesCmd() *cobra.Command {
	return iptablesCommand(iptablesDeps{getenv: os.Getenv, runner: iptables.ExecRunner{}, now: time.Now})
}

// iptablesCommand is istio-iptables with the same flag names and
// environment defaults (istio 1.14). The environment is read once, here.
func iptablesCommand(deps iptablesDeps) *cobra.Command {
	env := func(name, def string) string {
		if v, ok := lookup(deps.getenv, name); ok {
			return v
		}
		return def
	}
	def := iptables.DefaultConfig()
	cfg := iptables.Config{}
	var dryRun bool

	cmd := &cobra.Command{
		Use:   "iptables",
		Short: "Set up the iptables rules that capture the workload's traffic into the proxy (istio-iptables)",
		Long: "Script responsible for setting up port forwarding for Istio sidecar.\n\n" +
			"Writes the nat rules with one `iptables-restore --noflush` transaction; running it again\n" +
			"replaces the ISTIO_* chains and jumps instead of adding copies. Needs NET_ADMIN in the\n" +
			"target network namespace. With --dry-run it prints the rules and changes nothing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runIptables(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), deps, cfg, dryRun)
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
		env("ISTIO_INBOUND_INTERCEPTION_MODE", def.InboundInterceptionMode),
		"The mode used to redirect inbound connections to Envoy, either \"REDIRECT\" or \"TPROXY\" (TPROXY is not implemented yet)")
	f.StringVarP(&cfg.InboundTProxyMark, "inbound-tproxy-mark", "t", env("INBOUND_TPROXY_MARK", def.InboundTProxyMark),
		"Packet mark for TPROXY mode")
	f.StringVarP(&cfg.InboundTProxyRouteTable, "inbound-tproxy-route-table", "r",
		env("INBOUND_TPROXY_ROUTE_TABLE", def.InboundTProxyRouteTable), "Route table for TPROXY mode")
	f.StringVarP(&cfg.OutboundIPRangesInclude, "istio-service-cidr", "i", env("ISTIO_SERVICE_CIDR", ""),
		"Comma separated list of IP ranges in CIDR form to redirect to envoy (optional). "+
			"\"*\" redirects all outbound traffic; empty disables all outbound redirection")
	f.StringVarP(&cfg.OutboundIPRangesExclude, "istio-service-exclude-cidr", "x", env("ISTIO_SERVICE_EXCLUDE_CIDR", ""),
		"Comma separated list of IP ranges in CIDR form to be excluded from redirection")
	f.StringVarP(&cfg.InboundPortsInclude, "istio-inbound-ports", "b", env("ISTIO_INBOUND_PORTS", ""),
		"Comma separated list of inbound ports for which traffic is to be redirected to Envoy. "+
			"\"*\" redirects all ports; empty disables inbound redirection")
	f.StringVarP(&cfg.InboundPortsExclude, "istio-local-exclude-ports", "d", env("ISTIO_LOCAL_EXCLUDE_PORTS", ""),
		"Comma separated list of inbound ports to be excluded from redirection to Envoy (with -b '*')")
	f.StringVarP(&cfg.OutboundPortsInclude, "istio-outbound-ports", "q", env("ISTIO_OUTBOUND_PORTS", ""),
		"Comma separated list of outbound ports to be explicitly included for redirection to Envoy")
	f.StringVarP(&cfg.OutboundPortsExclude, "istio-local-outbound-ports-exclude", "o",
		env("ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE", ""),
		"Comma separated list of outbound ports to be excluded from redirection to Envoy")
	f.BoolVar(&dryRun, "dry-run", false, "Print the iptables-restore input to stdout and change nothing")

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

func runIptables(ctx context.Context, stdout, stderr io.Writer, deps iptablesDeps, cfg iptables.Config, dryRun bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	logInfo(stderr, deps.now(), "Istio iptables variables:\n"+cfg.VariablesBlock())
	rules, err := iptables.BuildRules(cfg)
	if err != nil {
		return err
	}
	if dryRun {
		_, err := io.WriteString(stdout, rules.String())
		return err
	}
	input, err := iptables.Apply(ctx, deps.runner, rules)
	if input != "" {
		logInfo(stderr, deps.now(), "Ran iptables-restore --noflush with the following input:\n"+input)
	}
	return err
}

// logInfo writes an istio-style log line ("TIMESTAMP\tinfo\tMESSAGE"); the
// multi-line blocks are meant to be read and diffed as the seed shows them,
// which a structured handler would escape.
func logInfo(w io.Writer, now time.Time, msg string) {
	fmt.Fprintf(w, "%s\tinfo\t%s\n", now.UTC().Format("2006-01-02T15:04:05.000000Z"), msg)
}
