package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/agent/config"
	"github.com/straitmesh/strait/internal/agent/dns"
	"github.com/straitmesh/strait/internal/agent/xdsproxy"
	"github.com/straitmesh/strait/internal/lifecycle"
)

// Defaults of the DNS proxy's agent options.
const (
	DefaultResolvConf      = "/etc/resolv.conf"
	DefaultDNSReadyTimeout = 5 * time.Second
)

// startDNS starts the DNS proxy and its name-table subscription when the
// pod captures DNS, and returns the readiness check: not ready until the
// first name table, or until DNSReadyTimeout has passed (then names are
// forwarded until the table comes). It returns nil, nil without capture.
func startDNS(cfg *config.Config, opts Options, xds *xdsproxy.Proxy, log *slog.Logger, serving *lifecycle.Group) (func() error, error) {
	if !cfg.DNSCapture {
		return nil, nil
	}
	path := opts.ResolvConf
	if path == "" {
		path = DefaultResolvConf
	}
	rc, err := dns.ReadResolvConf(path)
	if err != nil {
		return nil, fmt.Errorf("ISTIO_META_DNS_CAPTURE: the DNS proxy needs the pod's resolvers: %w", err)
	}
	srv, err := dns.New(dns.Options{
		Logger:        opts.Logger,
		Addr:          opts.DNSAddr,
		Namespace:     cfg.PodNamespace,
		ClusterDomain: clusterDomain(cfg),
		Search:        rc.Search,
		Upstreams:     rc.Servers,
	})
	if err != nil {
		return nil, fmt.Errorf("ISTIO_META_DNS_CAPTURE: %w (in %s)", err, path)
	}
	md, err := structpb.NewStruct(stringsToAny(cfg.NodeMetadata()))
	if err != nil {
		return nil, fmt.Errorf("dns proxy node metadata: %w", err)
	}
	node := &core.Node{Id: cfg.NodeID(), Cluster: cfg.ServiceCluster(), Metadata: md}
	serving.Go("dns proxy", srv.Run)
	serving.Go("dns name table", func(ctx context.Context) error {
		return dns.Watch(ctx, dns.WatchOptions{
			Logger:      opts.Logger,
			Client:      xds.Client(),
			Node:        node,
			Update:      srv.UpdateNameTable,
			BackoffBase: opts.XDSBackoffBase,
			BackoffMax:  opts.XDSBackoffMax,
		})
	})
	timeout := opts.DNSReadyTimeout
	if timeout <= 0 {
		timeout = DefaultDNSReadyTimeout
	}
	start := time.Now()
	var warn sync.Once
	return func() error {
		select {
		case <-srv.Ready():
			return nil
		default:
		}
		if time.Since(start) < timeout {
			return errors.New("dns proxy: waiting for the first name table from the control plane")
		}
		warn.Do(func() {
			log.Warn("no name table yet; the DNS proxy forwards every name until it comes", "waited", timeout)
		})
		return nil
	}, nil
}

// clusterDomain is the cluster's DNS domain from the node id's domain
// (NS.svc.DOMAIN), cluster.local if it has another shape.
func clusterDomain(cfg *config.Config) string {
	if d, ok := strings.CutPrefix(cfg.Domain, cfg.PodNamespace+".svc."); ok && d != "" {
		return d
	}
	return "cluster.local"
}

func stringsToAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
