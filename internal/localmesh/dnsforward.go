package localmesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/straitmesh/strait/internal/agent/dns"
)

// dnsForwardTimeout bounds one forwarded exchange: shorter than the
// agent's own (dns.DefaultTimeout), so that the agent relays the
// forwarder's SERVFAIL instead of timing out itself.
const dnsForwardTimeout = 2 * time.Second

// startDNSForwarder serves DNS on host port 53 (UDP and TCP) and forwards
// every query to upstreams, the way a pod's cluster DNS would reach the
// outside. It reuses the agent's DNS proxy with an empty name table. The
// returned stop function ends it and waits for it.
func startDNSForwarder(ctx context.Context, host netip.Addr, upstreams []string, log *slog.Logger) (stop func() error, err error) {
	srv, err := dns.New(dns.Options{
		Logger:    log,
		Addr:      netip.AddrPortFrom(host, 53).String(),
		Upstreams: upstreams,
		Timeout:   dnsForwardTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("DNS upstreams %v: %w", upstreams, err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	bound := make(chan error, 1)
	go func() {
		_, _, err := srv.Addrs(waitCtx)
		bound <- err
	}()
	select {
	case err = <-done:
		if err == nil {
			err = errors.New("stopped before it listened")
		}
	case err = <-bound:
		if err != nil {
			cancel()
			_ = <-done // the bind's error is the one to report
		}
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("DNS forwarder on %s port 53 (is another DNS server listening there?): %w", host, err)
	}
	return func() error {
		cancel()
		return <-done
	}, nil
}
