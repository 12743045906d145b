package xdsclient

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// The tests run the client against a scripted management server over real
// gRPC on an in-memory connection (bufconn), inside a synctest bubble: the
// test reads each request the client sends and decides each response, and
// back-off waits take virtual time, so their length can be checked exactly.

// fakeADS is a management server whose streams the test drives.
type fakeADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	streams chan *adsStream
}

// adsStream is one stream the client opened.
type adsStream struct {
	opened time.Time
	reqs   chan *discoveryv3.DiscoveryRequest
	resps  chan *discoveryv3.DiscoveryResponse
	end    chan error // the handler returns what it receives
	nonce  int
}

func (f *fakeADS) StreamAggregatedResources(ss discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	st := &adsStream{
		opened: time.Now(),
		reqs:   make(chan *discoveryv3.DiscoveryRequest, 16),
		resps:  make(chan *discoveryv3.DiscoveryResponse),
		end:    make(chan error),
	}
	f.streams <- st
	go func() {
		for {
			req, err := ss.Recv()
			if err != nil {
				close(st.reqs)
				return
			}
			st.reqs <- req
		}
	}()
	for {
		select {
		case r := <-st.resps:
			if err := ss.Send(r); err != nil {
				return err
			}
		case err := <-st.end:
			return err
		case <-ss.Context().Done():
			return ss.Context().Err()
		}
	}
}

// recv returns the next request of the stream.
func (st *adsStream) recv(t *testing.T) *discoveryv3.DiscoveryRequest {
	t.Helper()
	select {
	case r, ok := <-st.reqs:
		if !ok {
			t.Fatal("stream closed, want a request")
		}
		return r
	case <-time.After(time.Minute):
		t.Fatal("no request within a minute")
		return nil
	}
}

// noRequest checks that the client sends nothing more for a while.
func (st *adsStream) noRequest(t *testing.T) {
	t.Helper()
	select {
	case r := <-st.reqs:
		t.Fatalf("unexpected request %v", r)
	case <-time.After(time.Minute):
	}
}

// respond sends resources of one type with a fresh nonce and returns it.
func (st *adsStream) respond(t *testing.T, typeURL, version string, rs ...proto.Message) string {
	t.Helper()
	st.nonce++
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: version, Nonce: "n" + strconv.Itoa(st.nonce)}
	for _, r := range rs {
		a, err := anypb.New(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Resources = append(resp.Resources, a)
	}
	st.resps <- resp
	return resp.Nonce
}

// fakeHandler records what it applies; rejectVersion makes it fail one.
type fakeHandler struct {
	mu            sync.Mutex
	applied       []string // "TYPE VERSION"
	edsNames      []string // returned for every CDS update
	rdsNames      []string // returned for every LDS update
	rejectVersion string
}

func (h *fakeHandler) apply(kind, version string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if version == h.rejectVersion {
		return errors.New("handler rejects version " + version)
	}
	h.applied = append(h.applied, kind+" "+version)
	return nil
}

func (h *fakeHandler) ApplyClusters(v string, _ []*clusterv3.Cluster) ([]string, error) {
	return h.edsNames, h.apply("cds", v)
}

func (h *fakeHandler) ApplyEndpoints(v string, _ []*endpointv3.ClusterLoadAssignment) error {
	return h.apply("eds", v)
}

func (h *fakeHandler) ApplyListeners(v string, _ []*listenerv3.Listener) ([]string, error) {
	return h.rdsNames, h.apply("lds", v)
}

func (h *fakeHandler) ApplyRoutes(v string, _ []*routev3.RouteConfiguration) error {
	return h.apply("rds", v)
}

func (h *fakeHandler) appliedSoFar() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.applied)
}

type clientEnv struct {
	ads   *fakeADS
	stats *stats.Store
}

// startClient runs a client against a fakeADS until the test ends. Call it
// inside the synctest bubble.
func startClient(t *testing.T, h Handler, minBackoff, maxBackoff time.Duration, more ...func(*Options)) *clientEnv {
	t.Helper()
	env := &clientEnv{ads: &fakeADS{streams: make(chan *adsStream, 4)}, stats: stats.New()}
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, env.ads)
	go func() { _ = gs.Serve(lis) }()
	o := Options{
		Node:                   &corev3.Node{Id: "sidecar~10.0.0.1~a.demo~demo.svc.cluster.local"},
		NodeOnFirstRequestOnly: true,
		Dial:                   func(ctx context.Context) (net.Conn, error) { return lis.DialContext(ctx) },
		Handler:                h,
		Logger:                 slog.New(slog.DiscardHandler),
		Stats:                  env.stats,
		MinBackoff:             minBackoff,
		MaxBackoff:             maxBackoff,
	}
	for _, f := range more {
		f(&o)
	}
	c := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
		gs.Stop()
	})
	return env
}

func (env *clientEnv) nextStream(t *testing.T) *adsStream {
	t.Helper()
	select {
	case st := <-env.ads.streams:
		return st
	case <-time.After(time.Hour):
		t.Fatal("the client opened no stream within an hour")
		return nil
	}
}

// want checks one request's type, names, version, nonce and NACK state.
func want(t *testing.T, r *discoveryv3.DiscoveryRequest, typeURL string, names []string, version, nonce string, nack bool) {
	t.Helper()
	if r.GetTypeUrl() != typeURL || !slices.Equal(r.GetResourceNames(), names) || r.GetVersionInfo() != version ||
		r.GetResponseNonce() != nonce || (r.GetErrorDetail() != nil) != nack {
		t.Fatalf("request = {type %s names %q version %q nonce %q nack %v}, want {type %s names %q version %q nonce %q nack %v}",
			shortType(r.GetTypeUrl()), r.GetResourceNames(), r.GetVersionInfo(), r.GetResponseNonce(), r.GetErrorDetail() != nil,
			shortType(typeURL), names, version, nonce, nack)
	}
}

func counter(s *stats.Store, name string) uint64 { return s.Counter(name).Load() }

// The initial subscriptions, the ACK of each response, and the EDS and RDS
// subscriptions that follow from CDS and LDS.
func TestSubscribeAndACK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHandler{edsNames: []string{"outbound|80||a"}, rdsNames: []string{"80"}}
		env := startClient(t, h, time.Second, time.Minute)
		st := env.nextStream(t)

		cds := st.recv(t)
		want(t, cds, xdsapi.ClusterType, nil, "", "", false)
		if cds.GetNode().GetId() == "" {
			t.Error("the first request carries no node")
		}
		lds := st.recv(t)
		want(t, lds, xdsapi.ListenerType, nil, "", "", false)
		if lds.GetNode() != nil {
			t.Error("a request after the first carries the node again")
		}

		n := st.respond(t, xdsapi.ClusterType, "1", &clusterv3.Cluster{Name: "outbound|80||a"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "1", n, false)
		want(t, st.recv(t), xdsapi.EndpointType, []string{"outbound|80||a"}, "", "", false)

		n = st.respond(t, xdsapi.ListenerType, "1", &listenerv3.Listener{Name: "l"})
		want(t, st.recv(t), xdsapi.ListenerType, nil, "1", n, false)
		want(t, st.recv(t), xdsapi.RouteType, []string{"80"}, "", "", false)

		n = st.respond(t, xdsapi.EndpointType, "1", &endpointv3.ClusterLoadAssignment{ClusterName: "outbound|80||a"})
		want(t, st.recv(t), xdsapi.EndpointType, []string{"outbound|80||a"}, "1", n, false)

		// The same dependencies again: no new EDS subscription.
		n = st.respond(t, xdsapi.ClusterType, "2", &clusterv3.Cluster{Name: "outbound|80||a"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "2", n, false)
		st.noRequest(t)

		if got, w := h.appliedSoFar(), []string{"cds 1", "lds 1", "eds 1", "cds 2"}; !slices.Equal(got, w) {
			t.Errorf("applied %q, want %q", got, w)
		}
		if got := counter(env.stats, "cluster_manager.cds.update_success"); got != 2 {
			t.Errorf("cds update_success = %d, want 2", got)
		}
		if got := env.stats.Gauge("control_plane.connected_state").Load(); got != 1 {
			t.Errorf("connected_state = %d, want 1", got)
		}
	})
}

// Without set_node_on_first_message_only (Envoy's default) every request
// of a stream carries the node, also after a reconnection.
func TestNodeOnEveryRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := startClient(t, &fakeHandler{}, time.Second, time.Minute, func(o *Options) { o.NodeOnFirstRequestOnly = false })
		st := env.nextStream(t)
		cds := st.recv(t)
		lds := st.recv(t)
		n := st.respond(t, xdsapi.ClusterType, "1", &clusterv3.Cluster{Name: "a"})
		ack := st.recv(t)
		want(t, ack, xdsapi.ClusterType, nil, "1", n, false)
		for _, r := range []*discoveryv3.DiscoveryRequest{cds, lds, ack} {
			if r.GetNode().GetId() != "sidecar~10.0.0.1~a.demo~demo.svc.cluster.local" {
				t.Errorf("%s request (version %q) carries node %v, want the node on every request", shortType(r.GetTypeUrl()), r.GetVersionInfo(), r.GetNode())
			}
		}
	})
}

// A response the handler or the decoder rejects is NACKed with the last
// accepted version and the rejected nonce, and changes nothing.
func TestNACK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHandler{rejectVersion: "2"}
		env := startClient(t, h, time.Second, time.Minute)
		st := env.nextStream(t)
		st.recv(t) // CDS
		st.recv(t) // LDS

		n := st.respond(t, xdsapi.ClusterType, "1", &clusterv3.Cluster{Name: "a"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "1", n, false)

		// The handler rejects version 2.
		n = st.respond(t, xdsapi.ClusterType, "2", &clusterv3.Cluster{Name: "a"})
		nack := st.recv(t)
		want(t, nack, xdsapi.ClusterType, nil, "1", n, true)
		if nack.GetErrorDetail().GetCode() != int32(codes.InvalidArgument) || nack.GetErrorDetail().GetMessage() == "" {
			t.Errorf("NACK detail = %v, want InvalidArgument with a message", nack.GetErrorDetail())
		}

		// The decoder rejects a response with two resources of one name.
		n = st.respond(t, xdsapi.ClusterType, "3", &clusterv3.Cluster{Name: "a"}, &clusterv3.Cluster{Name: "a"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "1", n, true)

		// A good version is accepted again.
		n = st.respond(t, xdsapi.ClusterType, "4", &clusterv3.Cluster{Name: "a"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "4", n, false)

		if got, w := h.appliedSoFar(), []string{"cds 1", "cds 4"}; !slices.Equal(got, w) {
			t.Errorf("applied %q, want %q", got, w)
		}
		for name, w := range map[string]uint64{"update_attempt": 4, "update_success": 2, "update_rejected": 2} {
			if got := counter(env.stats, "cluster_manager.cds."+name); got != w {
				t.Errorf("cds %s = %d, want %d", name, got, w)
			}
		}
	})
}

// A broken stream is re-opened after a back-off that doubles from
// MinBackoff up to MaxBackoff, with jitter within [b/2, b], and resets once
// a stream got a response. The new stream subscribes again with the
// accepted versions and no nonce, and carries the node again.
func TestReconnectBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const minB, maxB = time.Second, 4 * time.Second
		h := &fakeHandler{edsNames: []string{"c"}}
		env := startClient(t, h, minB, maxB)

		st := env.nextStream(t)
		st.recv(t)
		st.recv(t)
		n := st.respond(t, xdsapi.ClusterType, "7", &clusterv3.Cluster{Name: "c"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "7", n, false)
		want(t, st.recv(t), xdsapi.EndpointType, []string{"c"}, "", "", false)

		// Fail five streams in a row without a response.
		st.end <- status.Error(codes.Unavailable, "management server going away")
		last := time.Now()
		for i, b := range []time.Duration{minB, 2 * minB, 4 * minB, maxB, maxB} {
			next := env.nextStream(t)
			waited := next.opened.Sub(last)
			if waited < b/2 || waited > b {
				t.Fatalf("reconnect %d after %v, want within [%v, %v]", i+1, waited, b/2, b)
			}
			cds := next.recv(t)
			want(t, cds, xdsapi.ClusterType, nil, "7", "", false)
			if cds.GetNode().GetId() == "" {
				t.Fatalf("reconnect %d: the first request carries no node", i+1)
			}
			want(t, next.recv(t), xdsapi.ListenerType, nil, "", "", false)
			want(t, next.recv(t), xdsapi.EndpointType, []string{"c"}, "", "", false)
			if got := env.stats.Gauge("control_plane.connected_state").Load(); got != 1 {
				t.Fatalf("connected_state = %d on a new stream, want 1", got)
			}
			if i == 4 {
				st = next
				break
			}
			next.end <- io.ErrUnexpectedEOF
			last = time.Now()
		}

		// A response resets the back-off.
		n = st.respond(t, xdsapi.ClusterType, "8", &clusterv3.Cluster{Name: "c"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "8", n, false)
		st.end <- status.Error(codes.Unavailable, "again")
		last = time.Now()
		next := env.nextStream(t)
		if waited := next.opened.Sub(last); waited < minB/2 || waited > minB {
			t.Fatalf("reconnect after a response after %v, want within [%v, %v]", waited, minB/2, minB)
		}
		want(t, next.recv(t), xdsapi.ClusterType, nil, "8", "", false)
	})
}

// rejectionRecorder is a fakeHandler that also records what it is told of
// rejected responses.
type rejectionRecorder struct {
	fakeHandler
	rejected []string // "TYPE NAME,NAME"
}

func (h *rejectionRecorder) Rejected(typeURL string, names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rejected = append(h.rejected, shortType(typeURL)+" "+strings.Join(names, ","))
}

// A handler that implements RejectionHandler learns the names of the
// resources of each response that is NACKed, whether the decoder or the
// handler refused it (listeners warming for a route configuration stop
// waiting for it, as Envoy's subscriptions are told of a failed update).
func TestRejectionHandlerLearnsNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &rejectionRecorder{fakeHandler: fakeHandler{rdsNames: []string{"80", "81"}, rejectVersion: "3"}}
		env := startClient(t, h, time.Second, time.Minute)
		st := env.nextStream(t)
		st.recv(t) // CDS
		st.recv(t) // LDS
		n := st.respond(t, xdsapi.ListenerType, "1", &listenerv3.Listener{Name: "l"})
		want(t, st.recv(t), xdsapi.ListenerType, nil, "1", n, false)
		want(t, st.recv(t), xdsapi.RouteType, []string{"80", "81"}, "", "", false)

		// The decoder refuses route configuration 81 (a virtual host
		// without a name): both names of the response are reported.
		bad := &routev3.RouteConfiguration{Name: "81", VirtualHosts: []*routev3.VirtualHost{{Domains: []string{"*"}}}}
		n = st.respond(t, xdsapi.RouteType, "2", &routev3.RouteConfiguration{Name: "80"}, bad)
		want(t, st.recv(t), xdsapi.RouteType, []string{"80", "81"}, "", n, true)
		// The handler refuses version 3.
		n = st.respond(t, xdsapi.RouteType, "3", &routev3.RouteConfiguration{Name: "80"})
		want(t, st.recv(t), xdsapi.RouteType, []string{"80", "81"}, "", n, true)
		h.mu.Lock()
		got := slices.Clone(h.rejected)
		h.mu.Unlock()
		if w := []string{"route_configuration 80,81", "route_configuration 80"}; !slices.Equal(got, w) {
			t.Errorf("rejections = %q, want %q", got, w)
		}
	})
}

// With ListenersAfter, LDS is not subscribed until it is closed (the proxy
// closes it once its clusters have initialized); then at once on the
// stream, and from the start on every later stream.
func TestListenersAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		h := &fakeHandler{edsNames: []string{"c"}}
		env := startClient(t, h, time.Second, time.Minute, func(o *Options) { o.ListenersAfter = gate })
		st := env.nextStream(t)
		want(t, st.recv(t), xdsapi.ClusterType, nil, "", "", false)
		st.noRequest(t)
		n := st.respond(t, xdsapi.ClusterType, "1", &clusterv3.Cluster{Name: "c"})
		want(t, st.recv(t), xdsapi.ClusterType, nil, "1", n, false)
		want(t, st.recv(t), xdsapi.EndpointType, []string{"c"}, "", "", false)
		st.noRequest(t)

		// A new stream before the gate opens: still no LDS, but EDS.
		st.end <- io.ErrUnexpectedEOF
		st = env.nextStream(t)
		want(t, st.recv(t), xdsapi.ClusterType, nil, "1", "", false)
		want(t, st.recv(t), xdsapi.EndpointType, []string{"c"}, "", "", false)
		st.noRequest(t)

		close(gate)
		want(t, st.recv(t), xdsapi.ListenerType, nil, "", "", false)
		n = st.respond(t, xdsapi.ListenerType, "1", &listenerv3.Listener{Name: "l"})
		want(t, st.recv(t), xdsapi.ListenerType, nil, "1", n, false)

		st.end <- io.ErrUnexpectedEOF
		next := env.nextStream(t)
		want(t, next.recv(t), xdsapi.ClusterType, nil, "1", "", false)
		want(t, next.recv(t), xdsapi.ListenerType, nil, "1", "", false)
		want(t, next.recv(t), xdsapi.EndpointType, []string{"c"}, "", "", false)
	})
}

// initial_fetch_timeout: unset is Envoy's 15 s, 0 waits for ever, a
// negative or malformed one is refused by name.
func TestInitialFetchTimeout(t *testing.T) {
	for _, tc := range []struct {
		cs   *corev3.ConfigSource
		want time.Duration
		bad  bool
	}{
		{nil, 15 * time.Second, false},
		{&corev3.ConfigSource{}, 15 * time.Second, false},
		{&corev3.ConfigSource{InitialFetchTimeout: durationpb.New(0)}, 0, false},
		{&corev3.ConfigSource{InitialFetchTimeout: durationpb.New(2 * time.Second)}, 2 * time.Second, false},
		{&corev3.ConfigSource{InitialFetchTimeout: durationpb.New(-time.Nanosecond)}, 0, true},
		{&corev3.ConfigSource{InitialFetchTimeout: &durationpb.Duration{Seconds: 1, Nanos: -1}}, 0, true},
	} {
		got, err := InitialFetchTimeout(tc.cs)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "initial_fetch_timeout") {
				t.Errorf("InitialFetchTimeout(%v) = %v, %v; want an error naming initial_fetch_timeout", tc.cs, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("InitialFetchTimeout(%v) = %v, %v; want %v", tc.cs, got, err, tc.want)
		}
	}
}
