package tracing

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"
)

// otlpCollector is a real gRPC server with the OTLP TraceService's
// Export method (its request read as TracesData, the same wire format).
type otlpCollector struct {
	got chan *tracepb.TracesData
	md  chan metadata.MD
}

func (c *otlpCollector) export(_ any, ctx context.Context, //nolint:revive // grpc.MethodDesc's handler signature
	dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var req tracepb.TracesData
	if err := dec(&req); err != nil {
		return nil, err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	c.md <- md
	c.got <- &req
	return &emptypb.Empty{}, nil
}

func startOTLPCollector(t *testing.T) (*otlpCollector, string) {
	c := &otlpCollector{got: make(chan *tracepb.TracesData, 10), md: make(chan metadata.MD, 10)}
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: c.export}},
	}, c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c, ln.Addr().String()
}

func TestOTLPReporter(t *testing.T) {
	c, addr := startOTLPCollector(t)
	reps := NewReporters(ReportersOptions{FlushInterval: 20 * time.Millisecond, Dial: func(ctx context.Context, cluster string) (net.Conn, error) {
		if cluster != "otel" {
			t.Errorf("dialed cluster %q", cluster)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}})
	defer reps.Close()
	rep := reps.For(Provider{Kind: KindOTLP, Cluster: "otel", Host: "otel-collector.observability", ServiceName: "app.ns", Header: "x-tenant", HeaderValue: "a"})
	start := time.Unix(1_700_000_000, 0)
	rep.Report(&Span{TraceID: TraceID{High: 1, Low: 2}, ID: 3, ParentID: 4, Name: "egress next", Kind: KindClient, Start: start, Duration: time.Second,
		Tags: []Tag{{"http.status_code", "503"}, {"error", "true"}}})
	select {
	case req := <-c.got:
		md := <-c.md
		if v := md.Get("x-tenant"); len(v) != 1 || v[0] != "a" {
			t.Errorf("metadata %v", md)
		}
		if v := md.Get(":authority"); len(v) != 1 || v[0] != "otel-collector.observability" {
			t.Errorf(":authority %v", v)
		}
		rs := req.GetResourceSpans()
		if len(rs) != 1 || rs[0].GetResource().GetAttributes()[0].GetValue().GetStringValue() != "app.ns" {
			t.Fatalf("resource %v", rs)
		}
		sp := rs[0].GetScopeSpans()[0].GetSpans()[0]
		if binary.BigEndian.Uint64(sp.GetTraceId()[:8]) != 1 || binary.BigEndian.Uint64(sp.GetTraceId()[8:]) != 2 ||
			binary.BigEndian.Uint64(sp.GetSpanId()) != 3 || binary.BigEndian.Uint64(sp.GetParentSpanId()) != 4 ||
			sp.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || sp.GetName() != "egress next" ||
			sp.GetEndTimeUnixNano()-sp.GetStartTimeUnixNano() != uint64(time.Second) || sp.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("span %v", sp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no export reached the collector")
	}
}
