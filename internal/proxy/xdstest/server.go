// Package xdstest is an in-process ADS management server for the proxy's
// tests: it serves whatever resources the test sets, state of the world,
// and records every DiscoveryRequest so tests can check ACKs and NACKs.
package xdstest

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

type typeData struct {
	version   string
	resources map[string]*anypb.Any // by name
	order     []string
}

// Server is a fake ADS server.
type Server struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	Addr string

	srv *grpc.Server

	mu       sync.Mutex // guards everything below
	types    map[string]*typeData
	requests []*discoveryv3.DiscoveryRequest
	streams  map[*stream]bool
	nonce    int
	changed  chan struct{} // closed and replaced on every new request
}

type stream struct {
	push chan string // type URLs to (re)send
}

// Start starts a server on 127.0.0.1:0; it stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartAt(t, "tcp", "127.0.0.1:0")
}

// StartAt starts a server on the given network ("tcp" or "unix") and
// address; it stops when the test ends.
func StartAt(t testing.TB, network, address string) *Server {
	t.Helper()
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Addr:    ln.Addr().String(),
		srv:     grpc.NewServer(),
		types:   map[string]*typeData{},
		streams: map[*stream]bool{},
		changed: make(chan struct{}),
	}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.srv, s)
	go s.srv.Serve(ln)
	t.Cleanup(s.srv.Stop)
	return s
}

// Stop stops the server, breaking every stream.
func (s *Server) Stop() { s.srv.Stop() }

// Set replaces every resource of a type and pushes it to every stream.
// nameOf extracts a resource's name.
func (s *Server) Set(typeURL, version string, resources ...proto.Message) {
	td := &typeData{version: version, resources: map[string]*anypb.Any{}}
	for _, r := range resources {
		a, err := anypb.New(r)
		if err != nil {
			panic(err)
		}
		n := resourceName(r)
		td.resources[n] = a
		td.order = append(td.order, n)
	}
	s.mu.Lock()
	s.types[typeURL] = td
	var sts []*stream
	for st := range s.streams {
		sts = append(sts, st)
	}
	s.mu.Unlock()
	for _, st := range sts {
		select {
		case st.push <- typeURL:
		default:
		}
	}
}

func resourceName(m proto.Message) string {
	type named interface{ GetName() string }
	type cla interface{ GetClusterName() string }
	if n, ok := m.(cla); ok {
		return n.GetClusterName()
	}
	if n, ok := m.(named); ok {
		return n.GetName()
	}
	panic(fmt.Sprintf("resource %T has no name", m))
}

// Requests returns every request received so far.
func (s *Server) Requests() []*discoveryv3.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// WaitRequest waits until a received request satisfies pred and returns it.
func (s *Server) WaitRequest(t testing.TB, timeout time.Duration, pred func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		for _, r := range s.requests {
			if pred(r) {
				s.mu.Unlock()
				return r
			}
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no matching DiscoveryRequest within %s", timeout)
			return nil
		}
	}
}

// StreamAggregatedResources implements ADS, state of the world.
func (s *Server) StreamAggregatedResources(ss discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	st := &stream{push: make(chan string, 16)}
	s.mu.Lock()
	s.streams[st] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, st)
		s.mu.Unlock()
	}()
	reqs := make(chan *discoveryv3.DiscoveryRequest)
	errc := make(chan error, 1)
	go func() {
		for {
			r, err := ss.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case reqs <- r:
			case <-ss.Context().Done():
				return
			}
		}
	}()
	subscribed := map[string][]string{} // type -> names (nil = wildcard)
	send := func(typeURL string) error {
		names, ok := subscribed[typeURL]
		if !ok {
			return nil
		}
		s.mu.Lock()
		td := s.types[typeURL]
		if td == nil {
			s.mu.Unlock()
			return nil
		}
		s.nonce++
		resp := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: td.version, Nonce: strconv.Itoa(s.nonce)}
		for _, n := range td.order {
			if names == nil || slices.Contains(names, n) {
				resp.Resources = append(resp.Resources, td.resources[n])
			}
		}
		s.mu.Unlock()
		return ss.Send(resp)
	}
	for {
		select {
		case err := <-errc:
			return err
		case <-ss.Context().Done():
			return ss.Context().Err()
		case typeURL := <-st.push:
			if err := send(typeURL); err != nil {
				return err
			}
		case r := <-reqs:
			s.mu.Lock()
			s.requests = append(s.requests, r)
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
			old, had := subscribed[r.GetTypeUrl()]
			names := r.GetResourceNames()
			if len(names) == 0 {
				names = nil
			}
			subscribed[r.GetTypeUrl()] = names
			if !had || !slices.Equal(old, names) {
				if err := send(r.GetTypeUrl()); err != nil {
					return err
				}
			}
		}
	}
}
