package tracing

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// FilterName is the name the tracing filter has in an HCM's chain (it is
// not one of http_filters: the HCM puts it first when tracing is set).
const FilterName = "strait.tracing"

// Request header names the filter reads and writes.
const (
	headerRequestID     = "x-request-id"
	headerClientTraceID = "x-client-trace-id"
	headerForceTrace    = "x-envoy-force-trace"
	headerDownstream    = "x-envoy-downstream-service-cluster"
	headerUserAgent     = "user-agent"
	// headerDecoratorOperation carries an egress span's decorator
	// operation to the next hop's ingress span.
	headerDecoratorOperation = "x-envoy-decorator-operation"
)

// Filter is the HCM's tracing as an HTTP filter that runs before every
// other: it decides and propagates on the request head, and finishes the
// span when the stream completes (httpfilter.Completer), on every codec.
// Immutable, shared by every stream of its HCM.
type Filter struct {
	cfg     *Config
	rep     Reporter
	kind    Kind
	nodeID  string
	service string
	at      int // the filter's position in the chain (its Scratch)
}

// FilterOptions build a Filter.
type FilterOptions struct {
	Config   *Config
	Reporter Reporter
	// Node is the proxy's node: its id is the node_id tag, its cluster
	// the spans' service name.
	Node *corev3.Node
	// Direction is the listener's traffic_direction: OUTBOUND makes
	// CLIENT spans (Envoy's egress), anything else SERVER (ingress).
	Direction corev3.TrafficDirection
	// At is the filter's position in its chain.
	At int
}

// NewFilter returns the tracing filter of an HCM.
func NewFilter(o FilterOptions) (*Filter, error) {
	if o.Config == nil || o.Reporter == nil {
		return nil, fmt.Errorf("tracing filter: a config and a reporter are required")
	}
	f := &Filter{cfg: o.Config, rep: o.Reporter, kind: KindServer, nodeID: o.Node.GetId(), service: o.Node.GetCluster(), at: o.At}
	if o.Direction == corev3.TrafficDirection_OUTBOUND {
		f.kind = KindClient
	}
	return f, nil
}

// Name is the filter's name in the chain.
func (f *Filter) Name() string { return FilterName }

// active is a sampled request's span in progress (in the stream's
// Scratch): what the tags need that is only valid during DecodeHeaders.
type active struct {
	span Span
	tags []Tag // request tags, taken at the head
}

// DecodeHeaders makes the request's x-request-id (generated when absent;
// the edge rules already ran in the HCM), decides sampling, reads the
// incoming trace context and writes the proxy's own upstream.
func (f *Filter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	h := s.RequestHeaders()
	slot := s.Scratch(f.at)
	*slot = nil
	id, has := h.Lookup(headerRequestID)
	if !has || id == "" {
		id = NewRequestID()
	}
	_, client := h.Lookup(headerClientTraceID)
	_, force := h.Lookup(headerForceTrace)
	reason, packed := f.cfg.Sampling.decide(f.cfg.RequestID, id, client, force)
	if !has || packed != id {
		h.Set(headerRequestID, packed)
	}
	id = packed // aliases a header until copied for a sampled span's tag
	parent, found, err := f.extract(h)
	if err != nil {
		return httpfilter.Continue // Envoy's NullSpan: nothing traced, nothing written
	}
	sampled := reason.Traced()
	if parent.Sampled != SampledUnset {
		sampled = parent.Sampled == SampledYes // an upstream decision wins
	}
	out := SpanContext{TraceState: parent.TraceState, Debug: parent.Debug}
	shared := false
	if found {
		out.TraceID = parent.TraceID
		if f.kind == KindServer && f.cfg.Provider.Kind == KindZipkin && f.cfg.Provider.SharedSpanContext {
			out.SpanID, out.ParentID, shared = parent.SpanID, parent.ParentID, true
		} else {
			out.SpanID, out.ParentID = newID(), parent.SpanID
		}
	} else {
		out.TraceID = newTraceID(f.cfg.Provider.Kind == KindOTLP || f.cfg.Provider.TraceID128)
		out.SpanID = newID()
	}
	if sampled {
		out.Sampled = SampledYes
	} else {
		out.Sampled = SampledNo
	}
	f.inject(h, out)
	name := f.operation(s, h)
	if !sampled {
		return httpfilter.Continue
	}
	a := &active{span: Span{TraceID: out.TraceID, ID: out.SpanID, ParentID: out.ParentID, Kind: f.kind, Start: time.Now(),
		Shared: shared, Debug: out.Debug, Service: f.service}}
	switch {
	case name != "":
		a.span.Name = strings.Clone(name)
	case f.kind == KindClient:
		a.span.Name = "egress " + s.Host()
	default:
		a.span.Name = "ingress"
	}
	a.tags = f.requestTags(s, h, strings.Clone(id), client)
	*slot = a
	return httpfilter.Continue
}

// operation is the span's name from the route's decorator, as Envoy's
// HCM (traceRequest) takes it: an egress span is named by the decorator
// and, when it propagates, sends the name upstream in
// x-envoy-decorator-operation; an ingress span is named by that header
// when a client sent one (else by the decorator), and the header goes no
// further. "" is Envoy's default name. The result may alias a header.
func (f *Filter) operation(s httpfilter.Stream, h httpfilter.HeaderMap) string {
	var op string
	propagate := false
	if rt := s.Route(); rt != nil {
		op, propagate = rt.Decorator()
	}
	if f.kind == KindClient {
		if op != "" && propagate {
			h.Set(headerDecoratorOperation, op)
		}
		return op
	}
	if v, ok := h.Lookup(headerDecoratorOperation); ok {
		if v != "" {
			op = strings.Clone(v)
		}
		h.Del(headerDecoratorOperation)
	}
	return op
}

// extract reads the incoming context in the provider's formats.
func (f *Filter) extract(h httpfilter.HeaderMap) (SpanContext, bool, error) {
	if f.cfg.Provider.Kind == KindOTLP {
		return ParseW3C(h)
	}
	c, ok, err := ParseB3(h)
	if ok || err != nil || !f.cfg.Provider.W3C {
		return c, ok, err
	}
	w, wok, werr := ParseW3C(h)
	if werr != nil || !wok {
		return c, false, werr
	}
	return w, true, nil
}

// inject writes c for the upstream in the provider's formats.
func (f *Filter) inject(h httpfilter.HeaderMap, c SpanContext) {
	if f.cfg.Provider.Kind == KindOTLP {
		InjectW3C(h, c)
		return
	}
	InjectB3(h, c)
	if f.cfg.Provider.W3C {
		InjectW3C(h, c)
	}
}

// requestTags are the tags read from the request head (copied: header
// values are only valid during DecodeHeaders).
func (f *Filter) requestTags(s httpfilter.Stream, h httpfilter.HeaderMap, id string, client bool) []Tag {
	tags := make([]Tag, 0, 16+len(f.cfg.CustomTags))
	tags = append(tags, Tag{tagComponent, tagProxy})
	if f.nodeID != "" {
		tags = append(tags, Tag{tagNodeID, f.nodeID})
	}
	tags = append(tags, Tag{tagGUIDRequestID, id})
	if client {
		v, _ := h.Lookup(headerClientTraceID)
		tags = append(tags, Tag{tagGUIDClientTraceID, strings.Clone(v)})
	}
	path := s.Path()
	if q := s.Query(); q != "" {
		path += "?" + q
	}
	if n := f.cfg.MaxPathTagLength; len(path) > n {
		path = path[:n]
	}
	tags = append(tags,
		Tag{tagHTTPURL, s.Scheme() + "://" + s.Host() + path},
		Tag{tagHTTPMethod, s.Method()},
		Tag{tagHTTPProtocol, s.Protocol()},
		Tag{tagDownstreamCluster, headerOr(h, headerDownstream, "-")},
		Tag{tagUserAgent, headerOr(h, headerUserAgent, "-")},
	)
	if a := s.RemoteAddr(); a.IsValid() {
		tags = append(tags, Tag{tagPeerAddress, a.String()})
	}
	for _, ct := range f.cfg.CustomTags {
		switch ct.Kind {
		case TagLiteral, TagEnvironment:
			tags = append(tags, Tag{ct.Tag, ct.Value})
		case TagRequestHeader:
			if v, ok := h.Lookup(ct.Name); ok {
				tags = append(tags, Tag{ct.Tag, strings.Clone(v)})
			} else if ct.HasDefault {
				tags = append(tags, Tag{ct.Tag, ct.Default})
			}
		}
	}
	return tags
}

func headerOr(h httpfilter.Headers, name, def string) string {
	if v, ok := h.Lookup(name); ok && v != "" {
		return strings.Clone(v)
	}
	return def
}

// Complete finishes a sampled request's span with the response's tags
// (Envoy's HttpTracerUtility::finalizeDownstreamSpan) and reports it.
func (f *Filter) Complete(s httpfilter.Stream, info *httpfilter.StreamInfo) {
	slot := s.Scratch(f.at)
	a, _ := (*slot).(*active)
	*slot = nil
	if a == nil {
		return
	}
	sp := &a.span
	sp.Duration = time.Since(sp.Start)
	sp.Tags = a.tags
	sp.Tags = append(sp.Tags,
		Tag{tagRequestSize, strconv.FormatInt(info.BytesIn, 10)},
		Tag{tagResponseSize, strconv.FormatInt(info.BytesOut, 10)},
		Tag{tagHTTPStatusCode, strconv.Itoa(info.Status)},
		Tag{tagResponseFlags, flagsOr(info.Flags)},
	)
	if info.Cluster != "" {
		sp.Tags = append(sp.Tags, Tag{tagUpstreamCluster, info.Cluster}, Tag{tagUpstreamName, info.Cluster})
	}
	if info.UpstreamHost.IsValid() {
		sp.Tags = append(sp.Tags, Tag{tagUpstreamAddress, info.UpstreamHost.String()})
	}
	if info.Status == 0 || info.Status >= 500 {
		sp.Tags = append(sp.Tags, Tag{tagError, "true"})
	}
	for _, ct := range f.cfg.CustomTags {
		if ct.Kind != TagMetadata {
			continue
		}
		if v, ok := s.Metadata().Get(ct.Name, ct.Key); ok {
			sp.Tags = append(sp.Tags, Tag{ct.Tag, fmt.Sprint(v)})
		} else if ct.HasDefault {
			sp.Tags = append(sp.Tags, Tag{ct.Tag, ct.Default})
		}
	}
	f.rep.Report(sp)
}

func flagsOr(flags string) string {
	if flags == "" {
		return "-"
	}
	return flags
}

var (
	_ httpfilter.Filter    = (*Filter)(nil)
	_ httpfilter.Completer = (*Filter)(nil)
)
