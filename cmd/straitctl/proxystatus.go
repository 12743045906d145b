package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/proxypush"
)

func newProxyStatusCmd() *cobra.Command {
	var sd straitdFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "proxy-status",
		Short: "Show whether each connected proxy has the latest configuration",
		Long: `proxy-status reads straitd's /debug/syncz and prints, per proxy (NAME is
POD.NAMESPACE, as istioctl shows it and proxy-config takes it) and resource
type (CDS, LDS, EDS, RDS):

  SYNCED    the proxy ACKed the last response straitd sent
  STALE     straitd sent a response the proxy has not ACKed (or NACKed it)
  NOT SENT  the proxy subscribes to the type but nothing was sent yet
  -         the proxy does not subscribe to the type

straitd serves its debug endpoints to loopback callers (straitctl on
straitd's host, or through kubectl port-forward) and to others that send a
token of straitd's namespace (--token-file): in file mode one from
"straitctl token create --namespace istio-system --service-account NAME",
on Kubernetes a service-account token for audience istio-ca
("kubectl create token default -n istio-system --audience istio-ca").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			statuses, err := fetchSyncz(ctx, sd)
			if err != nil {
				return err
			}
			return printProxyStatus(cmd.OutOrStdout(), statuses)
		},
	}
	sd.add(cmd, "straitd's monitoring address (host:port, or an http:// URL)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for straitd")
	return cmd
}

// straitdFlags say how to reach straitd's debug endpoints.
type straitdFlags struct {
	addr      string // --straitd-addr
	tokenFile string // --token-file
}

func (f *straitdFlags) add(cmd *cobra.Command, addrUsage string) {
	cmd.Flags().StringVar(&f.addr, "straitd-addr", "localhost:15014", addrUsage)
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding a bearer token for straitd's debug endpoints, needed unless straitd is reached over loopback: a token of straitd's namespace (straitctl token create --namespace istio-system ..., or kubectl create token default -n istio-system --audience istio-ca)")
}

func fetchSyncz(ctx context.Context, sd straitdFlags) ([]debugapi.SyncStatus, error) {
	base := sd.addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := strings.TrimSuffix(base, "/") + "/debug/syncz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--straitd-addr %q: %w", sd.addr, err)
	}
	if sd.tokenFile != "" {
		tok, err := os.ReadFile(sd.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s (is straitd running, and is --straitd-addr its --monitoring-addr?): %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		hint := ""
		switch {
		case resp.StatusCode == http.StatusUnauthorized && sd.tokenFile == "":
			hint = " (straitd answers only loopback callers without a token: give --token-file, or reach straitd on its host or through kubectl port-forward)"
		case resp.StatusCode == http.StatusForbidden:
			hint = " (the token of --token-file is not of straitd's namespace)"
		}
		return nil, fmt.Errorf("get %s: %s: %s%s", url, resp.Status, strings.TrimSpace(string(b)), hint)
	}
	var out []debugapi.SyncStatus
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("get %s: decode: %w", url, err)
	}
	return out, nil
}

// statusColumns are the types shown, in Istio's proxy-status order.
var statusColumns = []string{"cds", "lds", "eds", "rds"}

// printProxyStatus prints one row per connection, sorted by name.
func printProxyStatus(w io.Writer, statuses []debugapi.SyncStatus) error {
	statuses = slices.Clone(statuses)
	slices.SortStableFunc(statuses, func(a, b debugapi.SyncStatus) int {
		return cmp.Compare(proxyName(a.ProxyID), proxyName(b.ProxyID))
	})
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCDS\tLDS\tEDS\tRDS\tCONNECTION")
	for _, s := range statuses {
		cols := make([]string, len(statusColumns))
		for i, typ := range statusColumns {
			cols[i] = "-"
			for _, t := range s.Types {
				if t.Type == typ {
					cols[i] = typeState(t.Sent, t.Synced, t.LastNack)
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", proxyName(s.ProxyID), strings.Join(cols, "\t"), s.ConnectionID)
	}
	return tw.Flush()
}

// proxyName is a proxy's POD.NAMESPACE, the third field of its node id
// (the whole id when it does not parse).
func proxyName(nodeID string) string {
	p, err := proxypush.ParseNodeID(nodeID)
	if err != nil {
		return nodeID
	}
	return p.PodName + "." + p.Namespace
}

func typeState(sent string, synced bool, nack string) string {
	switch {
	case sent == "":
		return "NOT SENT"
	case synced:
		return "SYNCED"
	case nack != "":
		return "STALE (NACK: " + nack + ")"
	}
	return "STALE"
}
