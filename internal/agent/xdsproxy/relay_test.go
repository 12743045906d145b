package xdsproxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/xdsapi"
)

const timeout = 10 * time.Second

// fakeADS is a tiny control plane: it records every request and answers
// each request without a nonce (a new subscription, or a replay after a
// reconnect) with a response whose version and nonce name the server.
type fakeADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	name     string
	requests chan *discoveryv3.DiscoveryRequest
	server   *grpc.Server
	addr     string
}

func startFakeADS(t *testing.T, name, addr string) *fakeADS {
	t.Helper()
	var lis net.Listener
	var err error
	// Re-listening on a just-closed port can race the kernel briefly.
	deadline := time.Now().Add(timeout)
	for {
		lis, err = net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeADS{name: name, requests: make(chan *discoveryv3.DiscoveryRequest, 100), server: grpc.NewServer(), addr: lis.Addr().String()}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(f.server, f)
	go f.server.Serve(lis)
	t.Cleanup(f.server.Stop)
	return f
}

func (f *fakeADS) StreamAggregatedResources(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	for n := 1; ; n++ {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		f.requests <- req
		if req.GetResponseNonce() != "" {
			continue
		}
		if err := s.Send(f.response(req.GetTypeUrl(), n)); err != nil {
			return err
		}
	}
}

func (f *fakeADS) response(typeURL string, n int) *discoveryv3.DiscoveryResponse {
	res, _ := anypb.New(wrapperspb.String(f.name))
	return &discoveryv3.DiscoveryResponse{
		TypeUrl:     typeURL,
		VersionInfo: fmt.Sprintf("%s-v%d", f.name, n),
		Nonce:       fmt.Sprintf("%s-n%d", f.name, n),
		Resources:   []*anypb.Any{res},
	}
}

func (f *fakeADS) next(t *testing.T) *discoveryv3.DiscoveryRequest {
	t.Helper()
	select {
	case r := <-f.requests:
		return r
	case <-time.After(timeout):
		t.Fatalf("%s: no request within %v", f.name, timeout)
		return nil
	}
}

// startRelay runs a Proxy on a Unix socket in a temp dir and returns it
// with a client connection to that socket.
func startRelay(t *testing.T, upstream string) (*Proxy, discoveryv3.AggregatedDiscoveryServiceClient) {
	t.Helper()
	return startRelayWith(t, Options{UpstreamAddress: upstream})
}

// startRelayWith is startRelay with more options (the test's backoff and
// logger are set).
func startRelayWith(t *testing.T, opts Options) (*Proxy, discoveryv3.AggregatedDiscoveryServiceClient) {
	t.Helper()
	opts.BackoffBase = 20 * time.Millisecond
	opts.BackoffMax = 200 * time.Millisecond
	opts.Logger = slog.New(slog.DiscardHandler)
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "XDS")
	lis, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(lis) }()
	t.Cleanup(p.Stop)
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return p, discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
}

func recvWithin(t *testing.T, s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient) *discoveryv3.DiscoveryResponse {
	t.Helper()
	type result struct {
		r   *discoveryv3.DiscoveryResponse
		err error
	}
	ch := make(chan result, 1)
	go func() { r, err := s.Recv(); ch <- result{r, err} }()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("downstream Recv: %v", res.err)
		}
		return res.r
	case <-time.After(timeout):
		t.Fatalf("no response on the downstream stream within %v", timeout)
		return nil
	}
}

func TestRelayForwardsAndSurvivesUpstreamRestart(t *testing.T) {
	a := startFakeADS(t, "a", "127.0.0.1:0")
	p, client := startRelay(t, a.addr)

	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
	defer cancel()
	stream, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "sidecar~10.1.0.2~client.demo~demo.svc.cluster.local", Cluster: "client.demo"}

	// CDS: request with node goes up unchanged; response comes down unchanged; ACK goes up.
	cdsReq := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: xdsapi.ClusterType}
	if err := stream.Send(cdsReq); err != nil {
		t.Fatal(err)
	}
	if got := a.next(t); !proto.Equal(got, cdsReq) {
		t.Fatalf("upstream got %v, want %v", got, cdsReq)
	}
	resp := recvWithin(t, stream)
	if want := a.response(xdsapi.ClusterType, 1); !proto.Equal(resp, want) {
		t.Fatalf("downstream got %v, want %v", resp, want)
	}
	if cds, _ := p.Synced(); cds {
		t.Fatal("CDS reported synced before the ACK")
	}
	cdsAck := &discoveryv3.DiscoveryRequest{TypeUrl: xdsapi.ClusterType, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
	if err := stream.Send(cdsAck); err != nil {
		t.Fatal(err)
	}
	if got := a.next(t); !proto.Equal(got, cdsAck) {
		t.Fatalf("upstream got %v, want the ACK %v", got, cdsAck)
	}

	// LDS, then its ACK.
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdsapi.ListenerType}); err != nil {
		t.Fatal(err)
	}
	if got := a.next(t); got.GetTypeUrl() != xdsapi.ListenerType || got.GetNode() != nil {
		t.Fatalf("upstream got %v", got)
	}
	lresp := recvWithin(t, stream)
	if lresp.GetTypeUrl() != xdsapi.ListenerType || lresp.GetVersionInfo() != "a-v3" {
		t.Fatalf("downstream got %v", lresp)
	}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdsapi.ListenerType, VersionInfo: lresp.VersionInfo, ResponseNonce: lresp.Nonce}); err != nil {
		t.Fatal(err)
	}
	a.next(t)
	if cds, lds := p.Synced(); !cds || !lds {
		t.Fatalf("Synced() = %v, %v after CDS and LDS ACKs", cds, lds)
	}

	// Restart the control plane on the same address. The relay reconnects
	// and replays: CDS first with the node and the accepted version, then
	// LDS, without the old stream's nonces.
	a.server.Stop()
	b := startFakeADS(t, "b", a.addr)
	replayCDS := b.next(t)
	if replayCDS.GetTypeUrl() != xdsapi.ClusterType || !proto.Equal(replayCDS.GetNode(), node) ||
		replayCDS.GetVersionInfo() != "a-v1" || replayCDS.GetResponseNonce() != "" {
		t.Fatalf("first replayed request = %v", replayCDS)
	}
	replayLDS := b.next(t)
	if replayLDS.GetTypeUrl() != xdsapi.ListenerType || replayLDS.GetNode() != nil ||
		replayLDS.GetVersionInfo() != "a-v3" || replayLDS.GetResponseNonce() != "" {
		t.Fatalf("second replayed request = %v", replayLDS)
	}

	// The same downstream stream now carries b's responses, and requests
	// still flow up.
	for range 2 {
		r := recvWithin(t, stream)
		if r.GetNonce() != "b-n1" && r.GetNonce() != "b-n2" {
			t.Fatalf("after restart downstream got %v", r)
		}
	}
	edsReq := &discoveryv3.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", ResourceNames: []string{"outbound|80||a.demo"}}
	if err := stream.Send(edsReq); err != nil {
		t.Fatal(err)
	}
	if got := b.next(t); !proto.Equal(got, edsReq) {
		t.Fatalf("upstream b got %v, want %v", got, edsReq)
	}
	if r := recvWithin(t, stream); r.GetTypeUrl() != edsReq.TypeUrl {
		t.Fatalf("downstream got %v", r)
	}
	if p.metrics.upstreamConnects.Load() != 2 {
		t.Errorf("upstream connects = %d, want 2", p.metrics.upstreamConnects.Load())
	}
}

// TestRelayAgentSubscription: the agent's own type (the NDS name table)
// rides on the proxy's upstream stream: asked for after the proxy's
// requests, its responses go to the handler and never to the proxy, the
// relay ACKs them, NACKs what the handler refuses (keeping the accepted
// version), and asks again with the accepted version after a control-plane
// restart.
func TestRelayAgentSubscription(t *testing.T) {
	const ndsType = "type.googleapis.com/istio.networking.nds.v1.NameTable"
	a := startFakeADS(t, "a", "127.0.0.1:0")
	handled := make(chan string, 10)
	refuse := make(chan struct{})
	_, client := startRelayWith(t, Options{UpstreamAddress: a.addr, Subscriptions: map[string]func(*discoveryv3.DiscoveryResponse) error{
		ndsType: func(r *discoveryv3.DiscoveryResponse) error {
			handled <- r.GetVersionInfo()
			select {
			case <-refuse:
				return fmt.Errorf("bad table %s", r.GetVersionInfo())
			default:
				return nil
			}
		},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
	defer cancel()
	stream, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "sidecar~10.1.0.2~client.demo~demo.svc.cluster.local"}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: xdsapi.ClusterType}); err != nil {
		t.Fatal(err)
	}
	if got := a.next(t); got.GetTypeUrl() != xdsapi.ClusterType || !proto.Equal(got.GetNode(), node) {
		t.Fatalf("first upstream request %v, want the proxy's CDS with its node", got)
	}
	if got := a.next(t); got.GetTypeUrl() != ndsType || got.GetNode() != nil || got.GetVersionInfo() != "" {
		t.Fatalf("second upstream request %v, want the agent's NDS subscription", got)
	}
	ack := a.next(t)
	if ack.GetTypeUrl() != ndsType || ack.GetResponseNonce() != "a-n2" || ack.GetVersionInfo() != "a-v2" || ack.GetErrorDetail() != nil {
		t.Fatalf("upstream got %v, want the relay's ACK of the name table a-v2", ack)
	}
	if v := <-handled; v != "a-v2" {
		t.Fatalf("handler got %s", v)
	}
	if r := recvWithin(t, stream); r.GetTypeUrl() != xdsapi.ClusterType {
		t.Fatalf("downstream got %v, want only CDS", r)
	}

	// The proxy asking for the agent's type is ignored.
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: ndsType}); err != nil {
		t.Fatal(err)
	}
	// Restart: the replay asks for NDS with the accepted version; the new
	// table is refused and NACKed with that version kept.
	close(refuse)
	a.server.Stop()
	b := startFakeADS(t, "b", a.addr)
	if got := b.next(t); got.GetTypeUrl() != xdsapi.ClusterType {
		t.Fatalf("first replayed request %v", got)
	}
	if got := b.next(t); got.GetTypeUrl() != ndsType || got.GetVersionInfo() != "a-v2" || got.GetResponseNonce() != "" {
		t.Fatalf("replayed NDS request %v, want version a-v2 and no nonce", got)
	}
	nack := b.next(t)
	if nack.GetTypeUrl() != ndsType || nack.GetResponseNonce() != "b-n2" || nack.GetVersionInfo() != "a-v2" ||
		!strings.Contains(nack.GetErrorDetail().GetMessage(), "bad table b-v2") {
		t.Fatalf("upstream got %v, want a NACK of b-v2 keeping a-v2", nack)
	}
	if r := recvWithin(t, stream); r.GetTypeUrl() != xdsapi.ClusterType || r.GetNonce() != "b-n1" {
		t.Fatalf("downstream got %v, want b's CDS only", r)
	}
	select {
	case r := <-b.requests:
		t.Errorf("upstream got %v after the NACK; the proxy's NDS request must not go up", r)
	default:
	}
}

func TestRelayWaitsForUpstream(t *testing.T) {
	// Reserve a port, close it: the control plane is not up yet.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	_, client := startRelay(t, addr)

	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	stream, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, TypeUrl: xdsapi.ClusterType}); err != nil {
		t.Fatal(err)
	}
	// Envoy re-sends nothing while waiting; a later request of the same
	// type replaces the first.
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdsapi.ClusterType, ResourceNames: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	f := startFakeADS(t, "late", addr)
	got := f.next(t)
	if got.GetNode().GetId() != "n" || got.GetTypeUrl() != xdsapi.ClusterType {
		t.Fatalf("upstream got %v, want a CDS request with the node first", got)
	}
	// Normally both requests reached the relay while it waited, and only
	// the newest goes up. On a loaded machine the upstream can come up
	// before the relay has read the second one: then it follows, forwarded
	// as it came. Either way the upstream ends on the newest subscription.
	if len(got.GetResourceNames()) != 1 {
		if next := f.next(t); next.GetTypeUrl() != xdsapi.ClusterType || len(next.GetResourceNames()) != 1 {
			t.Fatalf("upstream got %v then %v, want the newest CDS request", got, next)
		}
	}
	if r := recvWithin(t, stream); r.GetNonce() != "late-n1" {
		t.Fatalf("downstream got %v", r)
	}
}

func TestDeltaUnimplemented(t *testing.T) {
	a := startFakeADS(t, "a", "127.0.0.1:0")
	_, client := startRelay(t, a.addr)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := client.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("delta Recv err = %v, want Unimplemented", err)
	}
}

func TestWriteMetrics(t *testing.T) {
	p, err := New(Options{UpstreamAddress: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	p.observeRequest(&discoveryv3.DiscoveryRequest{TypeUrl: xdsapi.ClusterType, ResponseNonce: "n"})
	var sb strings.Builder
	if err := p.WriteMetrics(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"strait_agent_xds_cds_acked 1\n", "strait_agent_xds_lds_acked 0\n", "# TYPE strait_agent_xds_upstream_connects_total counter\n"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, sb.String())
		}
	}
}
