package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/straitmesh/strait/internal/nds"
)

// WatchOptions configure Watch.
type WatchOptions struct {
	Logger *slog.Logger
	// Client opens ADS streams to the control plane.
	Client discovery.AggregatedDiscoveryServiceClient
	// Node identifies the agent's proxy; its metadata must say DNS_CAPTURE
	// true, or the control plane sends no table.
	Node *core.Node
	// Update receives every table the control plane sends.
	Update func(nds.NameTable)
	// BackoffBase and BackoffMax bound the delay between stream attempts
	// (defaults 100ms and 15s).
	BackoffBase, BackoffMax time.Duration
}

// Watch subscribes to the NDS name table on its own ADS stream, as
// Istio's agent does for the DNS proxy (the proxy itself never sees the
// table), and calls Update with each table. It ACKs what it decodes and
// NACKs what it cannot, re-opens a broken stream with backoff, and returns
// nil when ctx is done.
func Watch(ctx context.Context, opts WatchOptions) error {
	if opts.Client == nil || opts.Node == nil || opts.Update == nil {
		return errors.New("dns: Watch needs Client, Node and Update")
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = 100 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 15 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "dns")
	delay := opts.BackoffBase
	for {
		got, err := watchOnce(ctx, opts)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			delay = opts.BackoffBase
		}
		log.Warn("name table stream ended; retrying", "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, opts.BackoffMax)
	}
}

// watchOnce runs one stream until it fails; got says whether a response
// arrived.
func watchOnce(ctx context.Context, opts WatchOptions) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := opts.Client.StreamAggregatedResources(ctx)
	if err != nil {
		return false, fmt.Errorf("open ads stream: %w", err)
	}
	req := &discovery.DiscoveryRequest{Node: opts.Node, TypeUrl: nds.TypeURL}
	accepted := "" // the version of the last table applied
	for {
		if err := stream.Send(req); err != nil {
			return got, fmt.Errorf("send nds request: %w", err)
		}
		resp, err := stream.Recv()
		if err != nil {
			return got, fmt.Errorf("receive nds: %w", err)
		}
		got = true
		req = &discovery.DiscoveryRequest{TypeUrl: nds.TypeURL, ResponseNonce: resp.GetNonce()}
		nt, err := decodeResponse(resp)
		if err != nil {
			req.VersionInfo = accepted
			req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
			continue
		}
		accepted = resp.GetVersionInfo()
		req.VersionInfo = accepted
		opts.Update(nt)
	}
}

// decodeResponse merges the NameTables of an NDS response (Istio sends
// one); a response without resources is an empty table.
func decodeResponse(resp *discovery.DiscoveryResponse) (nds.NameTable, error) {
	if resp.GetTypeUrl() != nds.TypeURL {
		return nil, fmt.Errorf("nds: response of type %q, want %s", resp.GetTypeUrl(), nds.TypeURL)
	}
	out := nds.NameTable{}
	for _, r := range resp.GetResources() {
		if r.GetTypeUrl() != nds.TypeURL {
			return nil, fmt.Errorf("nds: resource of type %q, want %s", r.GetTypeUrl(), nds.TypeURL)
		}
		nt, err := nds.Unmarshal(r.GetValue())
		if err != nil {
			return nil, err
		}
		for h, ni := range nt {
			out[h] = ni
		}
	}
	return out, nil
}
