package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
)

func newTokenCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "token",
		Short: "Workload tokens for straitd's CA in file mode",
	}
	root.AddCommand(newTokenCreateCmd())
	return root
}

func newTokenCreateCmd() *cobra.Command {
	var (
		namespace, serviceAccount, caDir, out string
		ttl                                   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create --namespace NS --service-account SA",
		Short: "Issue a token that lets a workload request certificates for spiffe://<trust domain>/ns/NS/sa/SA",
		Long: `create signs a token with the key in straitd's CA directory (--ca-dir,
the same as straitd's; straitd creates the key on its first start). Store the
token beside the workload, where strait-agent reads it:
  <agent working directory>/var/run/secrets/tokens/istio-token
The agent sends it with each certificate request; straitd signs only
certificates for the token's namespace and service account. Anyone who reads
the token can get that identity's certificates until it expires: keep it
readable only by the agent's user. Replacing the key file revokes every token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			id := ca.Identity{TrustDomain: "x", Namespace: namespace, ServiceAccount: serviceAccount}
			if err := id.Validate(); err != nil {
				return fmt.Errorf("--namespace/--service-account: %w", err)
			}
			if ttl <= 0 {
				return fmt.Errorf("--ttl %v: want a positive duration (e.g. 720h)", ttl)
			}
			key, err := token.LoadKey(filepath.Join(caDir, token.KeyFile))
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%w (start straitd with --ca-dir %s once, or pass straitd's --ca-dir)", err, caDir)
			}
			if err != nil {
				return err
			}
			now := time.Now()
			tok, err := key.Issue(token.Claims{Namespace: namespace, ServiceAccount: serviceAccount, IssuedAt: now.Unix(), Expiry: now.Add(ttl).Unix()})
			if err != nil {
				return err
			}
			if out == "" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), tok)
				return err
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			return os.WriteFile(out, []byte(tok+"\n"), 0o600)
		},
	}
	f := cmd.Flags()
	f.StringVar(&namespace, "namespace", "", "the workload's namespace (required)")
	f.StringVar(&serviceAccount, "service-account", "", "the workload's service account (required)")
	f.DurationVar(&ttl, "ttl", 365*24*time.Hour, "how long the token is valid")
	f.StringVar(&caDir, "ca-dir", ca.DefaultDir, "straitd's --ca-dir (holds "+token.KeyFile+")")
	f.StringVarP(&out, "output-file", "o", "", "write the token to this file (mode 0600) instead of stdout")
	_ = cmd.MarkFlagRequired("namespace")
	_ = cmd.MarkFlagRequired("service-account")
	return cmd
}
