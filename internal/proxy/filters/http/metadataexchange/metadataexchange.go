// Package metadataexchange is Istio's istio.metadata_exchange HTTP filter
// (istio/proxy's peer_metadata filter, config
// io.istio.http.peer_metadata.Config): it learns who the peer workload is
// from the x-envoy-peer-metadata(-id) headers and tells the peer who we
// are in the same headers.
//
// On a sidecar's inbound listener Istio configures downstream_discovery
// and downstream_propagation: the client sidecar's headers are read from
// the request and removed before the application sees them, and ours are
// added to the response when the request carried the exchange. On an
// outbound listener it configures upstream_discovery and
// upstream_propagation: ours are added to the request (replacing any the
// application sent) and the server sidecar's are read from the response
// and removed before the client sees them.
//
// The peer is kept in the request's dynamic metadata (namespace
// Namespace, keys DownstreamPeer and UpstreamPeer, a *peermeta.Workload)
// for istio.stats.
package metadataexchange

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	xdsv3 "github.com/cncf/xds/go/xds/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
)

// Name is the filter name Istio gives the filter.
const Name = "istio.metadata_exchange"

// TypeURL is the type of its config, carried in a TypedStruct.
const TypeURL = "type.googleapis.com/io.istio.http.peer_metadata.Config"

// Where the peers go in the request's dynamic metadata.
const (
	Namespace      = "io.istio.peer"
	DownstreamPeer = "downstream_peer"
	UpstreamPeer   = "upstream_peer"
	// downstreamReceived marks a request that carried the exchange's id
	// and/or metadata headers (a received value, bits receivedID and
	// receivedMD): the response answers each with ours, as Istio's
	// MXPropagationMethod does. One key, so that a request costs one
	// metadata write and one read.
	downstreamReceived = "downstream_peer_received"
)

// received says which exchange headers a request carried.
type received uint8

const (
	receivedID received = 1 << iota
	receivedMD
)

// maxCache bounds the decoded headers kept (Istio's peer cache holds 500
// by default); when full it is emptied.
const maxCache = 500

// Factory builds the filter.
type Factory struct{}

var _ httpfilter.Factory = Factory{}

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Config is the filter's configuration.
type Config struct {
	DownstreamDiscovery, UpstreamDiscovery     bool
	DownstreamPropagation, UpstreamPropagation bool
}

// Parse reads the filter's typed_config: a TypedStruct (udpa.type.v1 or
// xds.type.v3) of io.istio.http.peer_metadata.Config. A field or method
// Strait does not implement is an error naming it.
func Parse(typed *anypb.Any) (Config, error) {
	var c Config
	if typed == nil {
		return c, nil
	}
	var typeURL string
	var value *structpb.Struct
	var ts1 udpav1.TypedStruct
	var ts3 xdsv3.TypedStruct
	switch {
	case typed.MessageIs(&ts1):
		if err := typed.UnmarshalTo(&ts1); err != nil {
			return c, fmt.Errorf("%s: %w", Name, err)
		}
		typeURL, value = ts1.GetTypeUrl(), ts1.GetValue()
	case typed.MessageIs(&ts3):
		if err := typed.UnmarshalTo(&ts3); err != nil {
			return c, fmt.Errorf("%s: %w", Name, err)
		}
		typeURL, value = ts3.GetTypeUrl(), ts3.GetValue()
	default:
		return c, fmt.Errorf("%s: typed_config %s is not a TypedStruct of %s", Name, typed.GetTypeUrl(), TypeURL)
	}
	if typeURL != TypeURL {
		return c, fmt.Errorf("%s: TypedStruct type_url %q, want %q", Name, typeURL, TypeURL)
	}
	for k, v := range value.GetFields() {
		var err error
		switch k {
		case "downstream_discovery":
			c.DownstreamDiscovery, err = methods(k, v, discoveryMethod)
		case "upstream_discovery":
			c.UpstreamDiscovery, err = methods(k, v, discoveryMethod)
		case "downstream_propagation":
			c.DownstreamPropagation, err = methods(k, v, propagationMethod)
		case "upstream_propagation":
			c.UpstreamPropagation, err = methods(k, v, propagationMethod)
		case "shared_with_upstream":
			if v.GetBoolValue() {
				err = fmt.Errorf("shared_with_upstream: true is not supported (waypoints only)")
			}
		case "additional_labels":
			if len(v.GetListValue().GetValues()) > 0 {
				err = fmt.Errorf("additional_labels is not supported")
			}
		default:
			err = fmt.Errorf("field %s is not supported", k)
		}
		if err != nil {
			return c, fmt.Errorf("%s: %w", Name, err)
		}
	}
	return c, nil
}

// methods reads a discovery or propagation list and reports whether it
// holds istio_headers.
func methods(field string, v *structpb.Value, check func(name string, m *structpb.Value) error) (bool, error) {
	headers := false
	for i, m := range v.GetListValue().GetValues() {
		fields := m.GetStructValue().GetFields()
		if len(fields) != 1 {
			return false, fmt.Errorf("%s[%d]: want exactly one method", field, i)
		}
		for name, body := range fields {
			if err := check(name, body); err != nil {
				return false, fmt.Errorf("%s[%d].%w", field, i, err)
			}
			headers = headers || name == "istio_headers"
		}
	}
	return headers, nil
}

// discoveryMethod accepts istio_headers and workload_discovery. Strait has
// no workload metadata discovery (WDS), so workload_discovery finds no
// peer, as Envoy's does for an address its workload table lacks.
func discoveryMethod(name string, body *structpb.Value) error {
	switch name {
	case "istio_headers", "workload_discovery":
		if n := len(body.GetStructValue().GetFields()); n > 0 {
			return fmt.Errorf("%s: fields are not supported", name)
		}
		return nil
	}
	return fmt.Errorf("%s: discovery method not supported (want istio_headers or workload_discovery)", name)
}

// propagationMethod accepts istio_headers without skip_external_clusters.
func propagationMethod(name string, body *structpb.Value) error {
	if name != "istio_headers" {
		return fmt.Errorf("%s: propagation method not supported (want istio_headers)", name)
	}
	for k, v := range body.GetStructValue().GetFields() {
		if k != "skip_external_clusters" || v.GetBoolValue() {
			return fmt.Errorf("istio_headers.%s is not supported", k)
		}
	}
	return nil
}

// Build makes the filter for ctx's node.
func (Factory) Build(typed *anypb.Any, ctx httpfilter.BuildContext) (httpfilter.Filter, error) {
	c, err := Parse(typed)
	if err != nil {
		return nil, err
	}
	return New(c, ctx.Node.GetId(), peermeta.FromStruct(ctx.Node.GetMetadata()))
}

// Filter is the built filter; immutable but for its cache, and safe for
// concurrent use.
type Filter struct {
	cfg     Config
	localID string
	local   string // our x-envoy-peer-metadata value

	mu    sync.RWMutex // guards cache
	cache map[string]*decoded
	// last is the value decode saw last with its workload: a sidecar's
	// requests mostly come from (or go to) one peer, and comparing the
	// ~300-byte value costs less than hashing it.
	last atomic.Pointer[decoded]
}

// decoded is a header value (owned) and its workload (nil: it does not
// decode).
type decoded struct {
	value string
	w     *peermeta.Workload
}

var (
	_ httpfilter.Filter          = (*Filter)(nil)
	_ httpfilter.ResponseEncoder = (*Filter)(nil)
)

// New builds the filter for the local workload with node id id.
func New(c Config, id string, local peermeta.Workload) (*Filter, error) {
	enc, err := peermeta.EncodeHeader(local)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &Filter{cfg: c, localID: id, local: enc, cache: map[string]*decoded{}}, nil
}

// Name is the filter name.
func (*Filter) Name() string { return Name }

// DecodeHeaders reads and strips the downstream peer's headers and adds
// ours for the upstream.
func (f *Filter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	h := s.RequestHeaders()
	if f.cfg.DownstreamDiscovery {
		id, v := take(h)
		var got received
		if id.n > 0 {
			got |= receivedID
		}
		if v.n > 0 {
			got |= receivedMD
		}
		if got != 0 {
			s.Metadata().Set(Namespace, downstreamReceived, got) // a one-byte value: boxed without allocating
		}
		if w := f.peer(v); w != nil {
			s.Metadata().Set(Namespace, DownstreamPeer, w)
		}
	}
	if f.cfg.UpstreamPropagation {
		// Ours replace any the application sent; the filter's own
		// values never change, so the codec may refer to them.
		f.setOurs(h, receivedID|receivedMD)
	}
	return httpfilter.Continue
}

// EncodeHeaders reads and strips the upstream peer's headers and answers
// a downstream peer that sent the exchange with ours.
func (f *Filter) EncodeHeaders(s httpfilter.Stream, _ int, h httpfilter.HeaderMap) {
	if f.cfg.UpstreamDiscovery {
		_, v := take(h)
		if w := f.peer(v); w != nil {
			s.Metadata().Set(Namespace, UpstreamPeer, w)
		}
	}
	if f.cfg.DownstreamPropagation {
		v, _ := s.Metadata().Get(Namespace, downstreamReceived)
		got, _ := v.(received)
		f.setOurs(h, got)
	}
}

// field is what a header block held of one exchange field: its value
// (the first's) and how many fields had the name.
type field struct {
	value string
	n     int
}

// FieldTaker is a HeaderMap that removes the exchange's two fields and
// returns what they held in one pass over its fields (the HTTP/1.1
// codec's): TakeFields removes every field named a or b,
// case-insensitively, and returns the first value of each and how many
// there were.
type FieldTaker interface {
	TakeFields(a, b string) (va string, na int, vb string, nb int)
}

// StaticPairSetter is a StaticSetter that sets two fields in one pass
// (httpfilter.StaticSetter's rules for each).
type StaticPairSetter interface {
	SetStaticPair(a, va, b, vb string)
}

// take removes the exchange fields (id, metadata) from h and returns
// them.
func take(h httpfilter.HeaderMap) (id, md field) {
	if t, ok := h.(FieldTaker); ok {
		id.value, id.n, md.value, md.n = t.TakeFields(peermeta.HeaderMetadataID, peermeta.HeaderMetadata)
		return id, md
	}
	var ok bool
	if id.value, ok = h.Lookup(peermeta.HeaderMetadataID); ok {
		id.n = 1
		h.Del(peermeta.HeaderMetadataID)
	}
	if md.value, ok = h.Lookup(peermeta.HeaderMetadata); ok {
		md.n = 1
		if strings.IndexByte(md.value, ',') >= 0 {
			md.n = 2 // fields joined by Lookup: more than one
		}
		h.Del(peermeta.HeaderMetadata)
	}
	return id, md
}

// peer is the workload of the received x-envoy-peer-metadata; nil when
// none was received, when it was sent more than once (what a header
// map's Lookup gives then is the values joined by commas, which do not
// decode: neither value is believed) or when it does not decode.
func (f *Filter) peer(md field) *peermeta.Workload {
	if md.n != 1 || md.value == "" {
		return nil
	}
	return f.decode(md.value)
}

// setOurs sets the exchange fields which names to ours, replacing any
// h has.
func (f *Filter) setOurs(h httpfilter.HeaderMap, which received) {
	switch which {
	case receivedID | receivedMD:
		if p, ok := h.(StaticPairSetter); ok {
			p.SetStaticPair(peermeta.HeaderMetadataID, f.localID, peermeta.HeaderMetadata, f.local)
			return
		}
		httpfilter.SetStatic(h, peermeta.HeaderMetadataID, f.localID)
		httpfilter.SetStatic(h, peermeta.HeaderMetadata, f.local)
	case receivedID:
		httpfilter.SetStatic(h, peermeta.HeaderMetadataID, f.localID)
	case receivedMD:
		httpfilter.SetStatic(h, peermeta.HeaderMetadata, f.local)
	}
}

// decode returns the workload a header value names, from the cache when
// this value was seen before; nil when it does not decode (the peer is
// then unknown, as in Istio).
func (f *Filter) decode(v string) *peermeta.Workload {
	if d := f.last.Load(); d != nil && d.value == v {
		return d.w
	}
	f.mu.RLock()
	d := f.cache[v]
	f.mu.RUnlock()
	if d == nil {
		d = &decoded{value: strings.Clone(v)}
		if dw, err := peermeta.DecodeHeader(v); err == nil {
			d.w = &dw
		}
		f.mu.Lock()
		if len(f.cache) >= maxCache {
			clear(f.cache)
		}
		f.cache[d.value] = d
		f.mu.Unlock()
	}
	if d.w != nil {
		// Only a value that decodes is remembered as the last: a
		// stream of distinct garbage does not displace a real peer.
		f.last.Store(d)
	}
	return d.w
}

// PeerOf returns the peer a request's metadata holds under key
// (DownstreamPeer or UpstreamPeer), nil when none.
func PeerOf(m *httpfilter.Metadata, key string) *peermeta.Workload {
	v, _ := m.Get(Namespace, key)
	w, _ := v.(*peermeta.Workload)
	return w
}
