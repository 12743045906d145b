// Package dnsresolver is the stub DNS resolver of the proxy's STRICT_DNS
// and LOGICAL_DNS clusters, as c-ares (Envoy's default resolver) behaves:
// the servers of a cluster's dns_resolution_config or of /etc/resolv.conf,
// A and AAAA queries by the cluster's dns_lookup_family, the answer's
// smallest TTL. Package cluster reads the cluster's resolver fields and
// runs the resolution loop.
package dnsresolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/miekg/dns"
)

// resolvConfPath is where the system resolver's servers come from, as
// c-ares (Envoy's default resolver) reads them.
const resolvConfPath = "/etc/resolv.conf"

// errNoServers is returned when a query could not reach any server.
var errNoServers = errors.New("no DNS server answered")

// Resolver asks DNS servers for a host's addresses. It is a plain
// stub resolver, like c-ares: no cache, one query per record type.
// Read-only once in use; safe for concurrent use.
type Resolver struct {
	// Servers are "ip:port"; empty means the nameservers of
	// /etc/resolv.conf, read at every lookup (a pod's file can change).
	Servers []string
	// Fallback: Servers are used only when the system's fail
	// (c-ares use_resolvers_as_fallback).
	Fallback bool
	// TCP sends queries over TCP (use_tcp_for_dns_lookups).
	TCP     bool
	Timeout time.Duration // per query and server
	Tries   int           // rounds over the servers
}

// Result is one resolution of one name.
type Result struct {
	Addrs []netip.Addr
	// TTL is the smallest TTL of the answer's address records; 0 when
	// there are none.
	TTL time.Duration
}

// Lookup resolves host for the lookup family. A name that does not exist,
// or has no records of the type asked, is a successful empty answer (as
// c-ares's ARES_ENOTFOUND and ARES_ENODATA are to Envoy); an error means
// no server gave an answer.
func (r *Resolver) Lookup(ctx context.Context, host string, family clusterv3.Cluster_DnsLookupFamily) (Result, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return Result{Addrs: []netip.Addr{ip}}, nil
	}
	switch family {
	case clusterv3.Cluster_V4_ONLY:
		return r.query(ctx, host, dns.TypeA)
	case clusterv3.Cluster_V6_ONLY:
		return r.query(ctx, host, dns.TypeAAAA)
	case clusterv3.Cluster_V4_PREFERRED:
		return r.preferred(ctx, host, dns.TypeA, dns.TypeAAAA)
	case clusterv3.Cluster_ALL:
		v4, err := r.query(ctx, host, dns.TypeA)
		if err != nil {
			return v4, err
		}
		v6, err := r.query(ctx, host, dns.TypeAAAA)
		if err != nil {
			return v6, err
		}
		return Result{Addrs: append(v4.Addrs, v6.Addrs...), TTL: MinTTL(v4.TTL, v6.TTL)}, nil
	default: // AUTO: IPv6 first, IPv4 when there is none
		return r.preferred(ctx, host, dns.TypeAAAA, dns.TypeA)
	}
}

func (r *Resolver) preferred(ctx context.Context, host string, first, second uint16) (Result, error) {
	res, err := r.query(ctx, host, first)
	if err != nil || len(res.Addrs) > 0 {
		return res, err
	}
	return r.query(ctx, host, second)
}

// MinTTL is the smaller of two TTLs, where 0 is none.
func MinTTL(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// query asks each server in turn, for tries rounds, until one answers.
func (r *Resolver) query(ctx context.Context, host string, qtype uint16) (Result, error) {
	servers := r.Servers
	if len(servers) == 0 || r.Fallback {
		sys := systemServers()
		if r.Fallback {
			servers = append(sys, r.Servers...)
		} else {
			servers = sys
		}
	}
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(host), qtype)
	network := "udp"
	if r.TCP {
		network = "tcp"
	}
	lastErr := errNoServers
	for range max(r.Tries, 1) {
		for _, server := range servers {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			resp, err := r.exchange(ctx, msg, network, server)
			if err != nil {
				lastErr = fmt.Errorf("%s: %w", server, err)
				continue
			}
			switch resp.Rcode {
			case dns.RcodeSuccess, dns.RcodeNameError:
				return answerAddrs(resp, qtype), nil
			default:
				lastErr = fmt.Errorf("%s: %s", server, dns.RcodeToString[resp.Rcode])
			}
		}
	}
	return Result{}, fmt.Errorf("resolve %s %s: %w", host, dns.TypeToString[qtype], lastErr)
}

func (r *Resolver) exchange(ctx context.Context, msg *dns.Msg, network, server string) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: r.Timeout}
	resp, _, err := c.ExchangeContext(ctx, msg, server)
	if err == nil && resp.Truncated && network == "udp" {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, msg, server)
	}
	return resp, err
}

// answerAddrs collects the address records of qtype in an answer, whatever
// their owner name (a CNAME chain ends on another name).
func answerAddrs(resp *dns.Msg, qtype uint16) Result {
	var res Result
	for _, rr := range resp.Answer {
		var ip net.IP
		switch a := rr.(type) {
		case *dns.A:
			if qtype == dns.TypeA {
				ip = a.A
			}
		case *dns.AAAA:
			if qtype == dns.TypeAAAA {
				ip = a.AAAA
			}
		}
		addr, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		res.Addrs = append(res.Addrs, addr.Unmap())
		res.TTL = MinTTL(res.TTL, time.Duration(rr.Header().Ttl)*time.Second)
	}
	return res
}

// systemServers are the nameservers of /etc/resolv.conf, or the local
// server when the file cannot be read (what glibc and c-ares assume).
func systemServers() []string {
	cfg, err := dns.ClientConfigFromFile(resolvConfPath)
	if err != nil || len(cfg.Servers) == 0 {
		return []string{"127.0.0.1:53"}
	}
	out := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		out = append(out, net.JoinHostPort(s, cfg.Port))
	}
	return out
}
