package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/model"
)

func newProxyStatusCmd() *cobra.Command {
	var addr string
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
  -         the proxy does not subscribe to the type`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			statuses, err := fetchSyncz(ctx, addr)
			if err != nil {
				return err
			}
			return printProxyStatus(cmd.OutOrStdout(), statuses)
		},
	}
	cmd.Flags().StringVar(&addr, "straitd-addr", "localhost:15014", "straitd's monitoring address (host:port, or an http:// URL)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for straitd")
	return cmd
}

func fetchSyncz(ctx context.Context, addr string) ([]debugapi.SyncStatus, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := strings.TrimSuffix(base, "/") + "/debug/syncz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--straitd-addr %q: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s (is straitd running, and is --straitd-addr its --monitoring-addr?): %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("get %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
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
	p, err := model.ParseNodeID(nodeID)
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
