package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"
)

// otlpExporter sends spans over OTLP/gRPC
// (opentelemetry.proto.collector.trace.v1.TraceService/Export) to the
// grpc_service's cluster, as Envoy's OpenTelemetry tracer does. The
// messages are the OpenTelemetry project's own generated Go types
// (go.opentelemetry.io/proto/otlp), so the wire format is the
// collector's, not a copy. The request is sent as a trace.v1.TracesData,
// whose only field (repeated ResourceSpans resource_spans = 1) is
// ExportTraceServiceRequest's on the wire: the collector package itself
// would pull grpc-gateway into the proxy for its HTTP gateway.
type otlpExporter struct {
	p    Provider
	conn *grpc.ClientConn
	err  error
}

func newOTLPExporter(p Provider, dial DialFunc) *otlpExporter {
	conn, err := grpc.NewClient("passthrough:///"+p.Host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority(p.Host),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			if dial == nil {
				return nil, fmt.Errorf("no cluster dialer")
			}
			return dial(ctx, p.Cluster)
		}))
	return &otlpExporter{p: p, conn: conn, err: err}
}

func (o *otlpExporter) export(ctx context.Context, spans []*Span) error {
	if o.err != nil {
		return fmt.Errorf("otlp collector %s: %w", o.p.Cluster, o.err)
	}
	if o.p.Header != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, o.p.Header, o.p.HeaderValue)
	}
	// The response's partial_success is read as unknown fields: a
	// rejected span is not retried (Envoy does not either).
	var resp emptypb.Empty
	service := o.p.ServiceName
	if service == "" && len(spans) > 0 {
		service = spans[0].Service // the node's cluster, as istiod writes service_name
	}
	if err := o.conn.Invoke(ctx, otlpExportMethod, otlpRequest(service, spans), &resp); err != nil {
		return fmt.Errorf("otlp collector %s: %w", o.p.Cluster, err)
	}
	return nil
}

func (o *otlpExporter) close() {
	if o.conn != nil {
		_ = o.conn.Close()
	}
}

// otlpExportMethod is the OTLP trace export RPC
// (opentelemetry/proto/collector/trace/v1/trace_service.proto).
const otlpExportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// otlpRequest is spans as one ResourceSpans whose resource carries
// service.name (Envoy's service_name).
func otlpRequest(service string, spans []*Span) *tracepb.TracesData {
	out := make([]*tracepb.Span, len(spans))
	for i, sp := range spans {
		var tid [16]byte
		binary.BigEndian.PutUint64(tid[:8], sp.TraceID.High)
		binary.BigEndian.PutUint64(tid[8:], sp.TraceID.Low)
		s := &tracepb.Span{
			TraceId: tid[:], SpanId: idBytes(sp.ID), Name: sp.Name, Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: uint64(sp.Start.UnixNano()), EndTimeUnixNano: uint64(sp.Start.Add(sp.Duration).UnixNano()),
		}
		if sp.Kind == KindClient {
			s.Kind = tracepb.Span_SPAN_KIND_CLIENT
		}
		if sp.ParentID != 0 {
			s.ParentSpanId = idBytes(sp.ParentID)
		}
		for _, t := range sp.Tags {
			if t.Key == tagError && t.Value == "true" {
				s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR}
			}
			s.Attributes = append(s.Attributes, stringAttr(t.Key, t.Value))
		}
		out[i] = s
	}
	return &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{stringAttr("service.name", service)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "strait-proxy"}, Spans: out}},
	}}}
}

func idBytes(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func stringAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}
