// Package tcpproxy is the envoy.filters.network.tcp_proxy network filter:
// it connects each downstream connection to an endpoint of a cluster and
// copies bytes both ways, propagating half-closes.
package tcpproxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// Name is the network filter name.
const Name = "envoy.filters.network.tcp_proxy"

// Clusters resolves cluster names (the cluster manager).
type Clusters interface {
	Get(name string) *cluster.Cluster
}

type weighted struct {
	name   string
	weight uint32
}

// Filter is one configured tcp_proxy. Immutable.
type Filter struct {
	StatPrefix string
	cluster    string
	weighted   []weighted
	total      uint32
}

// Build validates a TcpProxy config and returns the filter.
func Build(tp *tcpv3.TcpProxy) (*Filter, error) {
	f := &Filter{StatPrefix: tp.GetStatPrefix()}
	switch cs := tp.GetClusterSpecifier().(type) {
	case *tcpv3.TcpProxy_Cluster:
		f.cluster = cs.Cluster
	case *tcpv3.TcpProxy_WeightedClusters:
		for _, c := range cs.WeightedClusters.GetClusters() {
			if c.GetWeight() == 0 {
				continue
			}
			f.weighted = append(f.weighted, weighted{c.GetName(), c.GetWeight()})
			f.total += c.GetWeight()
		}
		if f.total == 0 {
			return nil, fmt.Errorf("weighted_clusters: total weight is 0")
		}
	default:
		return nil, fmt.Errorf("cluster specifier %T is not supported", cs)
	}
	return f, nil
}

func (f *Filter) pickCluster() string {
	if f.weighted == nil {
		return f.cluster
	}
	n := rand.Uint32N(f.total)
	for _, w := range f.weighted {
		if n < w.weight {
			return w.name
		}
		n -= w.weight
	}
	return f.weighted[len(f.weighted)-1].name
}

// Serve proxies the downstream connection c until both directions are done.
// dst is the connection's (original) destination, used by ORIGINAL_DST
// clusters. src, when valid, is the source address (and mark) of the
// upstream connection (listener filter original_src). Serve closes c.
func (f *Filter) Serve(ctx context.Context, c net.Conn, dst netip.AddrPort, src cluster.OriginalSource, clusters Clusters, log *slog.Logger) {
	defer c.Close()
	name := f.pickCluster()
	cl := clusters.Get(name)
	if cl == nil {
		log.Debug("tcp_proxy: unknown cluster", "cluster", name)
		return
	}
	ep, err := cl.Pick(dst)
	if err != nil {
		log.Debug("tcp_proxy: no upstream", "cluster", name, "err", err)
		return
	}
	ep.Source = src
	up, err := cl.Dial(ctx, ep)
	if err != nil {
		log.Debug("tcp_proxy: connect failed", "cluster", name, "err", err)
		return
	}
	defer up.Close()
	Pipe(c, up)
}

type closeWriter interface{ CloseWrite() error }

// Pipe copies a<->b until both directions hit EOF or an error, half-closing
// the write side of each peer when its source ends.
func Pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(closeWriter); ok && err == nil {
			cw.CloseWrite()
		} else {
			// An error in one direction ends both.
			a.Close()
			b.Close()
		}
	}
	go cp(b, a)
	cp(a, b)
	wg.Wait()
}
