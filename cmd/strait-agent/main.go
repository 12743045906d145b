// Command strait-agent is the per-workload agent: `strait-agent iptables`
// captures the workload's traffic, `strait-agent proxy sidecar` runs beside
// the application and runs strait-proxy, in its own process by default.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strait-agent:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "strait-agent",
		Short:         "Strait's per-workload agent: traffic capture and the sidecar supervisor",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newIptablesCmd(), newProxyCmd())
	return root
}
