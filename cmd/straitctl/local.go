package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/localmesh"
)

func newLocalCmd() *cobra.Command {
	local := &cobra.Command{
		Use:   "local",
		Short: "Run a Strait mesh on this host, in network namespaces (no cluster)",
	}
	local.AddCommand(newDemoCmd(), newUpCmd(), newExecCmd(), newStatusCmd())
	return local
}

func newDemoCmd() *cobra.Command {
	var o localmesh.DemoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a local mesh, split traffic by a VirtualService's weights, change them live, tear down",
		Long: `demo starts straitd on a config directory (examples/demo), creates a client pod
and two server pods (echo v1 and v2) in network namespaces on a private bridge,
captures their traffic with strait-agent iptables, starts a sidecar in each,
sends requests from the client to the service VIP and prints the observed
split next to the configured weights; then it rewrites the VirtualService
live, prints the new split, and removes everything it made. Needs root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("the local mesh creates network namespaces and iptables rules: run as root")
			}
			abs, err := filepath.Abs(o.BinDir)
			if err != nil {
				return err
			}
			o.BinDir = abs
			o.Out = cmd.OutOrStdout()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return localmesh.RunDemo(ctx, o)
		},
	}
	cmd.Flags().StringVar(&o.ConfigDir, "config-dir", "examples/demo", "directory of Istio YAML for straitd")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", localmesh.DefaultBinDir(), "directory with straitd, strait-agent, strait-proxy and strait-echo")
	cmd.Flags().IntVar(&o.Requests, "requests", 200, "requests per measurement")
	return cmd
}
