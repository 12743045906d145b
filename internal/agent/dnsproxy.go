package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/agent/dns"
	"github.com/straitmesh/strait/internal/agent/settings"
	"github.com/straitmesh/strait/internal/lifecycle"
	"github.com/straitmesh/strait/internal/nds"
)

// Defaults of the DNS proxy's agent options.
const (
	DefaultResolvConf      = "/etc/resolv.conf"
	DefaultDNSReadyTimeout = 5 * time.Second
)

// newDNSProxy creates the DNS proxy when the pod captures DNS (nil, nil
// without capture). Its name table comes on the proxy's own xDS stream:
// the relay subscribes to it (dnsSubscriptions), as pilot-agent does.
func newDNSProxy(cfg *settings.Config, opts Options) (*dns.Server, error) {
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
	return srv, nil
}

// dnsSubscriptions are the xDS relay's subscriptions for srv: the NDS
// name table, decoded and handed to srv (none without a DNS proxy).
func dnsSubscriptions(srv *dns.Server) map[string]func(*discovery.DiscoveryResponse) error {
	if srv == nil {
		return nil
	}
	return map[string]func(*discovery.DiscoveryResponse) error{
		nds.TypeURL: func(resp *discovery.DiscoveryResponse) error {
			nt, err := dns.DecodeResponse(resp)
			if err != nil {
				return err
			}
			srv.UpdateNameTable(nt)
			return nil
		},
	}
}

// startDNS serves srv and returns the readiness check: not ready until the
// first name table, or until DNSReadyTimeout has passed (then names are
// forwarded until the table comes). It returns nil for a nil srv.
func startDNS(srv *dns.Server, opts Options, log *slog.Logger, serving *lifecycle.Group) func() error {
	if srv == nil {
		return nil
	}
	serving.Go("dns proxy", srv.Run)
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
	}
}

// clusterDomain is the cluster's DNS domain from the node id's domain
// (NS.svc.DOMAIN), cluster.local if it has another shape.
func clusterDomain(cfg *settings.Config) string {
	if d, ok := strings.CutPrefix(cfg.Domain, cfg.PodNamespace+".svc."); ok && d != "" {
		return d
	}
	return "cluster.local"
}
