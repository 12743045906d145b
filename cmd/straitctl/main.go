// Command straitctl is Strait's command-line tool (istioctl's role). For now
// it runs the mesh on one host: `straitctl local demo`.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code) // local exec: the command's own status, already reported by it
		}
		fmt.Fprintln(os.Stderr, "straitctl:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "straitctl",
		Short:         "Strait's command-line tool",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newLocalCmd(), newKubeInjectCmd(), newProxyStatusCmd(), newProxyConfigCmd(), newTokenCmd(), newInstallCmd(), newUninstallCmd(), newValidateCmd())
	return root
}
