package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/proxypush"
)

func newProxyConfigCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "proxy-config",
		Short: "Show a proxy's configuration",
	}
	root.AddCommand(newProxyConfigSecretCmd())
	return root
}

func newProxyConfigSecretCmd() *cobra.Command {
	var (
		agentAddr, output string
		sd                straitdFlags
		statusPort        int
		timeout           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "secret POD[.NAMESPACE]",
		Short: "Show the certificates a sidecar's agent serves to its proxy over SDS",
		Long: `secret prints the workload certificate ("default") and the trust bundle
("ROOTCA") that the pod's strait-agent serves over SDS: SPIFFE ID, serial
number, validity and SHA-256 fingerprints, one row per certificate. The
agent's status port (15020) answers; the pod's address is looked up among
the proxies connected to straitd (--straitd-addr), or given with --agent-addr.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "short" && output != "json" {
				return fmt.Errorf("--output %q: want short or json", output)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			addr := agentAddr
			if addr == "" {
				ip, err := resolvePodIP(ctx, sd, args[0])
				if err != nil {
					return err
				}
				addr = net.JoinHostPort(ip, fmt.Sprint(statusPort))
			}
			dump, raw, err := fetchSecrets(ctx, addr)
			if err != nil {
				return err
			}
			if output == "json" {
				_, err := cmd.OutOrStdout().Write(raw)
				return err
			}
			return printSecrets(cmd.OutOrStdout(), dump, time.Now())
		},
	}
	f := cmd.Flags()
	sd.add(cmd, "straitd's monitoring address, to find the pod's address")
	f.StringVar(&agentAddr, "agent-addr", "", "the agent's status address (host:port); skips the lookup in straitd")
	f.IntVar(&statusPort, "status-port", 15020, "the agent's status port")
	f.StringVarP(&output, "output", "o", "short", "short or json")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait")
	return cmd
}

// resolvePodIP finds POD[.NAMESPACE] among the proxies connected to
// straitd (their node ids carry IP and POD.NAMESPACE).
func resolvePodIP(ctx context.Context, sd straitdFlags, pod string) (string, error) {
	name, ns, _ := strings.Cut(pod, ".")
	statuses, err := fetchSyncz(ctx, sd)
	if err != nil {
		return "", err
	}
	var ips, seen []string
	for _, s := range statuses {
		p, err := proxypush.ParseNodeID(s.ProxyID)
		if err != nil {
			continue
		}
		seen = append(seen, p.PodName+"."+p.Namespace)
		if p.PodName == name && (ns == "" || p.Namespace == ns) {
			ips = append(ips, p.IP)
		}
	}
	switch len(ips) {
	case 1:
		return ips[0], nil
	case 0:
		return "", fmt.Errorf("no proxy %q is connected to straitd (connected: %s)", pod, strings.Join(seen, ", "))
	}
	return "", fmt.Errorf("%d proxies are named %q; give POD.NAMESPACE", len(ips), pod)
}

func fetchSecrets(ctx context.Context, addr string) (debugapi.SecretsDump, []byte, error) {
	var dump debugapi.SecretsDump
	url := "http://" + addr + "/debug/secrets"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return dump, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return dump, nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return dump, nil, fmt.Errorf("get %s: %w", url, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return dump, nil, fmt.Errorf("get %s: 404: the agent serves no certificates (its CA address is plaintext, or it predates SDS)", url)
	}
	if resp.StatusCode != http.StatusOK {
		return dump, nil, fmt.Errorf("get %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(raw, &dump); err != nil {
		return dump, nil, fmt.Errorf("get %s: decode: %w", url, err)
	}
	return dump, raw, nil
}

// printSecrets prints istioctl's columns, one row per certificate, plus
// the SPIFFE ID (workload certificate) or fingerprint (roots).
func printSecrets(w io.Writer, d debugapi.SecretsDump, now time.Time) error {
	if len(d.Secrets) == 0 {
		return errors.New("the agent has no certificate yet (see its log for the certificate request)")
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE NAME\tTYPE\tSTATUS\tVALID CERT\tSERIAL NUMBER\tNOT AFTER\tNOT BEFORE\tIDENTITY / SHA256")
	for _, s := range d.Secrets {
		for i, c := range s.Certs {
			what := "sha256:" + c.SHA256
			if i == 0 && len(c.SPIFFEIDs) > 0 {
				what = strings.Join(c.SPIFFEIDs, ",")
			}
			valid := !now.Before(c.NotBefore) && now.Before(c.NotAfter)
			fmt.Fprintf(tw, "%s\t%s\tACTIVE\t%t\t%s\t%s\t%s\t%s\n", s.Name, s.Type, valid, c.SerialNumber,
				c.NotAfter.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339), what)
		}
	}
	return tw.Flush()
}
