package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/istioconfig"
)

func newTokenCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "token",
		Short: "Workload tokens for straitd's CA in file mode",
	}
	root.AddCommand(newTokenCreateCmd())
	return root
}

// defaultTokenTTL is a token's lifetime unless --ttl is given: an hour,
// as istioctl x workload entry configure --tokenDuration defaults to.
const defaultTokenTTL = time.Hour

func newTokenCreateCmd() *cobra.Command {
	var (
		namespace, serviceAccount, caDir, out string
		workloadEntry, name                   string
		ttl                                   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create (--workload-entry FILE [--name NAME] | --namespace NS --service-account SA)",
		Short: "Issue a token that lets a workload request certificates for spiffe://<trust domain>/ns/NS/sa/SA",
		Long: `create signs a token with the key in straitd's CA directory (--ca-dir,
the same as straitd's; straitd creates the key on its first start). The
identity is the namespace and service account given, or those of a
WorkloadEntry (its metadata.namespace and spec.serviceAccount) read from
--workload-entry, the YAML file straitd serves it from.

Store the token beside the workload, where strait-agent reads it:
  <agent working directory>/var/run/secrets/tokens/istio-token
The agent sends it with its certificate requests; straitd signs only
certificates for the token's namespace and service account. Anyone who reads
the token can get that identity's certificates until it expires: keep it
readable only by the agent's user. Replacing the key file revokes every token.

A token lasts one hour unless --ttl says otherwise (Istio's VM tokens last
one hour too). That is enough: once the agent has its first certificate it
renews with that certificate, not the token, for as long as it runs. An
agent that starts again (a restart, a reboot) needs a valid token for its
first certificate again, since its key is kept in memory only: issue a new
token then, or give hosts whose agent restarts unattended a longer --ttl.
Replacing the key file does not stop an agent that already holds a
certificate from renewing it; rotating the CA does.`,
		Example: `  straitctl token create --workload-entry /etc/strait/config/vm1.yaml \
    -o /srv/vm1/var/run/secrets/tokens/istio-token
  straitctl token create --namespace shop --service-account orders --ttl 24h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			switch {
			case workloadEntry != "" && (f.Changed("namespace") || f.Changed("service-account")):
				return errors.New("--workload-entry takes the namespace and service account from the WorkloadEntry; drop --namespace/--service-account")
			case workloadEntry != "":
				var err error
				if namespace, serviceAccount, err = workloadEntryIdentity(workloadEntry, name); err != nil {
					return err
				}
			case f.Changed("name"):
				return errors.New("--name picks a WorkloadEntry of --workload-entry; give --workload-entry FILE too")
			case namespace == "" || serviceAccount == "":
				return errors.New("give --workload-entry FILE, or both --namespace and --service-account")
			}
			if err := validateIdentityNames(namespace, serviceAccount); err != nil {
				return err
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
			if err := os.WriteFile(out, []byte(tok+"\n"), 0o600); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.ErrOrStderr(), "token for ns/%s/sa/%s written to %s (valid until %s)\n",
				namespace, serviceAccount, out, now.Add(ttl).UTC().Format(time.RFC3339))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&workloadEntry, "workload-entry", "", "YAML file holding the workload's WorkloadEntry: the token is for its namespace and spec.serviceAccount")
	f.StringVar(&name, "name", "", "the WorkloadEntry's metadata.name, when --workload-entry holds several")
	f.StringVar(&namespace, "namespace", "", "the workload's namespace (without --workload-entry)")
	f.StringVar(&serviceAccount, "service-account", "", "the workload's service account (without --workload-entry)")
	f.DurationVar(&ttl, "ttl", defaultTokenTTL, "how long the token is valid (the agent needs it for its first certificate only; it renews with that certificate)")
	f.StringVar(&caDir, "ca-dir", ca.DefaultDir, "straitd's --ca-dir (holds "+token.KeyFile+")")
	f.StringVarP(&out, "output-file", "o", "", "write the token to this file (mode 0600) instead of stdout")
	return cmd
}

// workloadEntryIdentity finds the WorkloadEntry named name (any, if the
// file holds one) in file and returns its namespace and service account.
func workloadEntryIdentity(file, name string) (namespace, serviceAccount string, err error) {
	res := istioconfig.LoadFile(file)
	if res.Err != nil {
		return "", "", fmt.Errorf("--workload-entry: %w", res.Err)
	}
	var found []*istioconfig.Config
	var names []string
	for _, c := range res.Configs {
		if c.Kind != istioconfig.KindWorkloadEntry {
			continue
		}
		names = append(names, c.Namespace+"/"+c.Name)
		if name == "" || c.Name == name {
			found = append(found, c)
		}
	}
	switch {
	case len(names) == 0:
		return "", "", fmt.Errorf("--workload-entry %s: holds no WorkloadEntry", file)
	case len(found) == 0:
		return "", "", fmt.Errorf("--workload-entry %s: no WorkloadEntry named %q (it holds %s)", file, name, strings.Join(names, ", "))
	case len(found) > 1:
		return "", "", fmt.Errorf("--workload-entry %s: holds %d WorkloadEntries (%s); pick one with --name", file, len(found), strings.Join(names, ", "))
	}
	we := found[0]
	sa := we.WorkloadEntry().GetServiceAccount()
	if sa == "" {
		return "", "", fmt.Errorf("--workload-entry %s: WorkloadEntry %s/%s has no spec.serviceAccount; set it to the workload's identity (its certificate is spiffe://<trust domain>/ns/%s/sa/<serviceAccount>)",
			file, we.Namespace, we.Name, we.Namespace)
	}
	return we.Namespace, sa, nil
}

// validateIdentityNames checks the names as Kubernetes does: a namespace is
// a DNS-1123 label and a service account a DNS-1123 subdomain, so a token
// is never issued for an identity no workload can have.
func validateIdentityNames(namespace, serviceAccount string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(serviceAccount); len(errs) > 0 {
		return fmt.Errorf("service account %q: %s", serviceAccount, strings.Join(errs, "; "))
	}
	return (ca.Identity{TrustDomain: "x", Namespace: namespace, ServiceAccount: serviceAccount}).Validate()
}
