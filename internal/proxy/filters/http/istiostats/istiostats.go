// Package istiostats is Istio's istio.stats HTTP filter (istio/proxy
// source/extensions/filters/http/istio_stats, config stats.PluginConfig):
// when a request completes it records istio_requests_total,
// istio_request_duration_milliseconds, istio_request_bytes and
// istio_response_bytes with Istio's labels (package istiometrics), the
// peer taken from what istio.metadata_exchange learned.
//
// The reporter follows the listener: OUTBOUND reports as "source",
// anything else as "destination". The destination service comes from the
// outbound cluster's name (outbound|PORT|SUBSET|HOST); without one, from
// the Host header unless disable_host_header_fallback is set, as Istio
// sets it on inbound listeners so that a client cannot make series with
// made-up hosts.
package istiostats

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	statspb "istio.io/api/envoy/extensions/stats"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/filters/http/metadataexchange"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/istiometrics"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Name is the filter name Istio gives the filter.
const Name = "istio.stats"

// TypeURL is its config's type.
const TypeURL = "type.googleapis.com/stats.PluginConfig"

// Factory builds the filter.
type Factory struct{}

var _ httpfilter.Factory = Factory{}

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Parse reads and checks the filter's typed_config.
func Parse(typed *anypb.Any) (*statspb.PluginConfig, error) {
	var c statspb.PluginConfig
	if typed == nil {
		return &c, nil
	}
	if err := typed.UnmarshalTo(&c); err != nil {
		return nil, fmt.Errorf("%s: typed_config %s is not stats.PluginConfig: %w", Name, typed.GetTypeUrl(), err)
	}
	if err := fieldaudit.Check(Name, c.ProtoReflect(), honoured, nil); err != nil {
		return nil, err
	}
	if p := c.GetStatPrefix(); p != "" && p != "istio_" && p != "istio" {
		return nil, fmt.Errorf("%s: stat_prefix %q is not supported (want istio_)", Name, p)
	}
	if c.GetReporter() != statspb.Reporter_UNSPECIFIED {
		return nil, fmt.Errorf("%s: reporter %v is not supported (want UNSPECIFIED: the listener's direction decides)", Name, c.GetReporter())
	}
	for i, m := range c.GetMetrics() {
		if len(m.GetDimensions()) > 0 || len(m.GetTagsToRemove()) > 0 || m.GetMatch() != "" {
			return nil, fmt.Errorf("%s: metrics[%d] (%s): dimensions, tags_to_remove and match are not supported (only name and drop)", Name, i, m.GetName())
		}
		if !istiometrics.Known("istio_" + m.GetName()) {
			return nil, fmt.Errorf("%s: metrics[%d]: %q is not one of Istio's standard metrics (custom metrics are not supported)", Name, i, m.GetName())
		}
	}
	return &c, nil
}

// Dropped are the metrics c drops, by full name (istio_requests_total).
func Dropped(c *statspb.PluginConfig) []string {
	var out []string
	for _, m := range c.GetMetrics() {
		if m.GetDrop() {
			out = append(out, "istio_"+m.GetName())
		}
	}
	return out
}

// Build makes the filter, recording into ctx.Stats.
func (Factory) Build(typed *anypb.Any, ctx httpfilter.BuildContext) (httpfilter.Filter, error) {
	c, err := Parse(typed)
	if err != nil {
		return nil, err
	}
	st := ctx.Stats
	if st == nil {
		// Built for validation before the HCM has the proxy's store
		// (hcm.Filter.UseStats builds the chain again with it): record
		// into a store nobody reads.
		st = stats.New()
	}
	m, err := istiometrics.NewHTTP(st, Dropped(c)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	reporter := istiometrics.Destination
	if ctx.Direction == corev3.TrafficDirection_OUTBOUND {
		reporter = istiometrics.Source
	}
	return &Filter{
		metrics:      m,
		reporter:     reporter,
		local:        peermeta.FromStruct(ctx.Node.GetMetadata()),
		hostFallback: !c.GetDisableHostHeaderFallback(),
		cache:        map[seriesKey]*cached{},
	}, nil
}

// Filter is the built filter: immutable but for its cache, safe for
// concurrent use.
type Filter struct {
	// What a request reads first, together.
	reporter     istiometrics.Reporter
	hostFallback bool
	// last is the series set the last request found: the next one is
	// most often like it (a listener's requests between the same two
	// workloads), and comparing its key costs less than hashing it.
	last atomic.Pointer[cached]

	metrics *istiometrics.HTTP
	local   peermeta.Workload
	mu      sync.RWMutex // guards cache
	cache   map[seriesKey]*cached
}

// cached is a series set and its key (whose strings it owns), in one
// allocation.
type cached struct {
	set istiometrics.HTTPSeries
	key seriesKey
}

// maxCachedSeries bounds the filter's cache of series sets; when full it
// is emptied. The store's series cap bounds what is recorded, this only
// what is remembered for speed.
const maxCachedSeries = 1024

// seriesKey is what a request's labels are computed from, besides what
// is fixed for the filter (the reporter, the local workload): requests
// with equal keys record into the same series, found in the cache
// without building the 25 label values and looking them up in each of
// the four families.
type seriesKey struct {
	// peer is the workload istio.metadata_exchange decoded, one pointer
	// per distinct header value it keeps (nil: unknown).
	peer *peermeta.Workload
	// The destination service is read from one of these, and only
	// when the key is not found: svc (the cluster's istio.services
	// metadata), or svcFrom, an outbound cluster's name when
	// svcFromCluster, else the Host header without its port.
	svc                           *istiometrics.Service
	svcFrom                       string
	svcFromCluster                bool
	peerPrincipal, localPrincipal string
	flags                         string
	code, grpcStatus              int
	grpc, mtls                    bool
}

// exchange is the labels' input for k.
func (f *Filter) exchange(k *seriesKey) istiometrics.Exchange {
	e := istiometrics.Exchange{
		Reporter:       f.reporter,
		Local:          f.local,
		Protocol:       "http",
		Code:           k.code,
		GRPCStatus:     k.grpcStatus,
		Flags:          k.flags,
		Service:        k.service(),
		PeerPrincipal:  k.peerPrincipal,
		LocalPrincipal: k.localPrincipal,
		MTLS:           k.mtls,
	}
	if k.grpc {
		e.Protocol = "grpc"
	}
	if k.peer != nil {
		e.Peer = *k.peer
	}
	return e
}

// service is the destination service k names.
func (k *seriesKey) service() istiometrics.Service {
	switch {
	case k.svc != nil:
		return *k.svc
	case k.svcFromCluster:
		svc, _ := istiometrics.ServiceFromCluster(k.svcFrom)
		return svc
	case k.svcFrom != "":
		return istiometrics.ServiceFromHost(k.svcFrom)
	}
	return istiometrics.Service{}
}

// series returns the series set of k: from the cache, or found in the
// store (and kept when the store had room for all of it).
func (f *Filter) series(k *seriesKey) *istiometrics.HTTPSeries {
	if c := f.last.Load(); c != nil && c.key == *k {
		return &c.set
	}
	f.mu.RLock()
	c := f.cache[*k]
	f.mu.RUnlock()
	if c != nil {
		f.last.Store(c)
		return &c.set
	}
	e := f.exchange(k)
	var buf [32]string
	found, complete := f.metrics.Series(istiometrics.AppendHTTP(buf[:0], &e))
	c = &cached{set: found}
	if !complete {
		return &c.set
	}
	// The key's strings may alias the request's buffers (the Host
	// header, a cluster named by a request header): the kept copy owns
	// its own.
	c.key = *k
	c.key.svcFrom = strings.Clone(k.svcFrom)
	c.key.peerPrincipal, c.key.localPrincipal, c.key.flags = strings.Clone(k.peerPrincipal), strings.Clone(k.localPrincipal), strings.Clone(k.flags)
	f.mu.Lock()
	if len(f.cache) >= maxCachedSeries {
		clear(f.cache)
	}
	f.cache[c.key] = c
	f.mu.Unlock()
	f.last.Store(c)
	return &c.set
}

var (
	_ httpfilter.Filter    = (*Filter)(nil)
	_ httpfilter.Completer = (*Filter)(nil)
)

// Name is the filter name.
func (*Filter) Name() string { return Name }

// DecodeHeaders does nothing: the filter records on Complete.
func (*Filter) DecodeHeaders(httpfilter.Stream) httpfilter.Status { return httpfilter.Continue }

// Complete records the request.
func (f *Filter) Complete(s httpfilter.Stream, info *httpfilter.StreamInfo) {
	k := seriesKey{code: info.Status, grpcStatus: info.GRPCStatus, flags: info.Flags}
	if f.reporter == istiometrics.Source {
		k.peer = metadataexchange.PeerOf(s.Metadata(), metadataexchange.UpstreamPeer)
		// The upstream's certificate names the destination; ours on that
		// connection the source (Istio's upstream peer and local
		// principal). Without mTLS both stay unknown.
		k.peerPrincipal, k.localPrincipal = info.UpstreamPeerPrincipal, info.UpstreamLocalPrincipal
	} else {
		k.peer = metadataexchange.PeerOf(s.Metadata(), metadataexchange.DownstreamPeer)
		if c := s.Connection(); c != nil {
			k.mtls = c.Secure && c.PeerCertificate != nil
			if k.mtls && len(c.URISANs) > 0 {
				k.peerPrincipal = c.URISANs[0]
			}
			if k.mtls && len(c.LocalURISANs) > 0 {
				k.localPrincipal = c.LocalURISANs[0]
			}
		}
	}
	if info.Service != nil {
		k.svc = info.Service // the cluster's istio.services metadata, as Istio reads it first
	} else if istiometrics.IsServiceCluster(info.Cluster) {
		k.svcFrom, k.svcFromCluster = info.Cluster, true
	} else if f.hostFallback {
		k.svcFrom = istiometrics.HostWithoutPort(s.Host())
	}
	req := s.RequestHeaders()
	if ct, _ := req.Lookup("content-type"); strings.HasPrefix(ct, "application/grpc") {
		k.grpc = true
	} else {
		// Istio reads grpc-status only for a gRPC request: an HTTP/2
		// request a gRPC server refused (415 with grpc-status) is "http"
		// with no gRPC status.
		k.grpcStatus = -1
	}
	reqBytes := info.BytesIn + headerBytes(req) + int64(len(s.Method())+len(s.Host())+len(s.Path())+len(s.Scheme()))
	respBytes := info.BytesOut
	if h, ok := info.UpstreamHeaders.(httpfilter.HeaderMap); ok && h != nil {
		respBytes += headerBytes(h)
	}
	f.series(&k).Record(float64(info.Duration.Milliseconds()), reqBytes, respBytes)
}

// headerBytes is the size Envoy's HeaderMap::byteSize counts: the names'
// and values' lengths.
func headerBytes(h httpfilter.HeaderMap) int64 {
	if bs, ok := h.(httpfilter.ByteSizer); ok {
		return bs.ByteSize()
	}
	var n int64
	h.Range(func(name, value string) bool {
		n += int64(len(name) + len(value))
		return true
	})
	return n
}

// Series is a test hook: the store's istio_requests_total series for
// values.
func (f *Filter) Series(values []string) *stats.Series { return f.metrics.Requests.With(values) }
