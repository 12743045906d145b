package xds

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// edsPush asks for an endpoints-only push, as a registry does when only
// endpoints changed.
func edsPush(env *testEnv) {
	env.server.ConfigUpdate(&proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}})
}

// claNames returns the cluster names of an EDS response's
// ClusterLoadAssignments, sorted.
func claNames(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	out := make([]string, 0, len(r.Resources))
	for _, a := range r.Resources {
		var cla endpoint.ClusterLoadAssignment
		if err := a.UnmarshalTo(&cla); err != nil {
			t.Fatalf("EDS resource: %v", err)
		}
		out = append(out, cla.ClusterName)
	}
	slices.Sort(out)
	return out
}

// TestSotWPartialEDS checks which ClusterLoadAssignments a state-of-the-world
// EDS response carries: only the changed ones for an endpoints-only push,
// the whole set for everything else. Each case starts from a proxy that
// subscribed to a, b and c and ACKed the answer; change must cause one EDS
// response, whose assignments are compared with want.
func TestSotWPartialEDS(t *testing.T) {
	all := []string{"a", "b", "c"}
	tests := []struct {
		name   string
		change func(t *testing.T, env *testEnv, c *adsClient)
		want   []string
	}{
		{
			name:   "endpoints push sends only the changed assignment",
			change: func(_ *testing.T, env *testEnv, _ *adsClient) { env.gen.bumpEndpoints("b"); edsPush(env) },
			want:   []string{"b"},
		},
		{
			name: "endpoints pushes compare with what was last sent",
			change: func(_ *testing.T, env *testEnv, c *adsClient) {
				env.gen.bumpEndpoints("a", "b")
				edsPush(env)
				c.ack(c.expect(xdsapi.EndpointType), all)
				env.gen.bumpEndpoints("c")
				edsPush(env)
			},
			want: []string{"c"},
		},
		{
			name: "an assignment the generator did not know before is sent",
			change: func(t *testing.T, env *testEnv, c *adsClient) {
				env.gen.setUnknownEDS("c")
				c.request(xdsapi.EndpointType, all, "", "")
				r := c.expect(xdsapi.EndpointType)
				if got := claNames(t, r); !slices.Equal(got, []string{"a", "b"}) {
					t.Fatalf("EDS without c = %q", got)
				}
				c.ack(r, all)
				env.gen.setUnknownEDS()
				edsPush(env)
			},
			want: []string{"c"},
		},
		{
			name:   "full push sends the whole set",
			change: func(_ *testing.T, env *testEnv, _ *adsClient) { env.gen.bumpEndpoints("b"); fullPush(env) },
			want:   all,
		},
		{
			name: "the endpoints push after a NACK sends the whole set",
			change: func(t *testing.T, env *testEnv, c *adsClient) {
				env.gen.bumpEndpoints("b")
				edsPush(env)
				r := c.expect(xdsapi.EndpointType)
				c.nack(r, all, "", "endpoints of b: bad config")
				eventually(t, "NACK recorded", func() bool { return env.watched(t, xdsapi.EndpointType).NackError != "" })
				env.gen.bumpEndpoints("c")
				edsPush(env)
			},
			want: all,
		},
		{
			name: "a stale NACK also makes the next endpoints push send the whole set",
			change: func(t *testing.T, env *testEnv, c *adsClient) {
				env.gen.bumpEndpoints("b")
				edsPush(env)
				first := c.expect(xdsapi.EndpointType)
				env.gen.bumpEndpoints("c")
				edsPush(env)
				second := c.expect(xdsapi.EndpointType)
				if got := claNames(t, second); !slices.Equal(got, []string{"c"}) {
					t.Fatalf("second EDS push = %q, want only c", got)
				}
				// b was rejected, but the response after it did not
				// carry b again.
				c.nack(first, all, "", "endpoints of b: bad config")
				c.ack(second, all)
				eventually(t, "ACK recorded", func() bool { return env.watched(t, xdsapi.EndpointType).NonceAcked == second.Nonce })
				env.gen.bumpEndpoints("a")
				edsPush(env)
			},
			want: all,
		},
		{
			name: "a new subscription gets the whole set",
			change: func(_ *testing.T, env *testEnv, c *adsClient) {
				env.gen.bumpEndpoints("b")
				edsPush(env)
				c.ack(c.expect(xdsapi.EndpointType), all)
				c.request(xdsapi.EndpointType, all, "", "")
			},
			want: all,
		},
		{
			name: "changed resource names get the whole set",
			change: func(_ *testing.T, env *testEnv, c *adsClient) {
				env.gen.bumpEndpoints("b")
				edsPush(env)
				c.ack(c.expect(xdsapi.EndpointType), []string{"a", "b", "c", "d"})
			},
			want: []string{"a", "b", "c", "d"},
		},
		{
			name: "an assignment no longer generated makes the push send the whole set",
			change: func(_ *testing.T, env *testEnv, _ *adsClient) {
				env.gen.setUnknownEDS("b")
				env.gen.bumpEndpoints("c")
				edsPush(env)
			},
			want: []string{"a", "c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env := newTestEnv(t, nil)
				c := env.connect(t, testNodeID)
				c.request(xdsapi.EndpointType, all, "", "")
				first := c.expect(xdsapi.EndpointType)
				if got := claNames(t, first); !slices.Equal(got, all) {
					t.Fatalf("first EDS = %q, want %q", got, all)
				}
				c.ack(first, all)

				tt.change(t, env, c)
				r := c.expect(xdsapi.EndpointType)
				if got := claNames(t, r); !slices.Equal(got, tt.want) {
					t.Errorf("EDS response = %q, want %q", got, tt.want)
				}
				c.expectNone(testDebounce + quietInterval)
			})
		})
	}
}

// TestSotWPartialEDSBookkeeping checks that a partial EDS response is
// accounted like any other: versions and nonces in /debug/syncz, the push
// counter, the convergence time; and that an endpoints push that changes
// nothing sends nothing.
func TestSotWPartialEDSBookkeeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		names := []string{"a", "b", "c"}
		c.request(xdsapi.EndpointType, names, "", "")
		first := c.expect(xdsapi.EndpointType)
		c.ack(first, names)

		edsPush(env) // nothing changed
		c.expectNone(testDebounce + quietInterval)

		env.gen.bumpEndpoints("a")
		edsPush(env)
		r := c.expect(xdsapi.EndpointType)
		if got := claNames(t, r); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("EDS response = %q, want only a", got)
		}
		if r.VersionInfo == first.VersionInfo || r.Nonce == first.Nonce {
			t.Errorf("partial response reuses version %s or nonce %s", r.VersionInfo, r.Nonce)
		}
		// The server records what it sent after the send returns: the
		// client may read the response first.
		eventually(t, "the partial response recorded as sent", func() bool {
			w := env.watched(t, xdsapi.EndpointType)
			return w.VersionSent == r.VersionInfo && w.NonceSent == r.Nonce
		})
		c.ack(r, names)
		eventually(t, "partial response ACKed", func() bool {
			sz := env.server.SyncStatuses()
			return len(sz) == 1 && len(sz[0].Types) == 1 && sz[0].Types[0].Synced && sz[0].Types[0].Acked == r.VersionInfo
		})
		if got := metricValue(t, env.reg, "pilot_xds_pushes", map[string]string{"type": "eds"}); got != 2 {
			t.Errorf("pilot_xds_pushes{type=eds} = %v, want 2", got)
		}
		if n := histogramCount(t, env.reg, "pilot_proxy_convergence_time"); n != 1 {
			t.Errorf("pilot_proxy_convergence_time observed %d times, want 1 (the endpoints change)", n)
		}
	})
}

func TestChangedResources(t *testing.T) {
	res := func(nameVersions ...string) []*discovery.Resource {
		var out []*discovery.Resource
		for i := 0; i < len(nameVersions); i += 2 {
			out = append(out, &discovery.Resource{Name: nameVersions[i], Version: nameVersions[i+1],
				Resource: &anypb.Any{TypeUrl: xdsapi.EndpointType, Value: []byte(nameVersions[i])}})
		}
		return out
	}
	sent := byName(res("a", "1", "b", "1"))
	tests := []struct {
		name      string
		res       []*discovery.Resource
		want      []string // values of the changed Anys
		wantWhole bool
	}{
		{"nothing changed", res("a", "1", "b", "1"), []string{}, false},
		{"only the order changed", res("b", "1", "a", "1"), []string{}, false},
		{"one changed", res("a", "1", "b", "2"), []string{"b"}, false},
		{"one new", res("a", "1", "b", "1", "c", "1"), []string{"c"}, false},
		{"a duplicate is sent once", res("a", "2", "a", "2", "b", "1"), []string{"a"}, false},
		{"one gone", res("a", "2"), nil, true},
		{"the last one gone", res("a", "1"), nil, true},
		{"the first one gone", res("b", "1"), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed, whole := changedResources(byName(tt.res), sent)
			got := []string{}
			for _, a := range changed {
				got = append(got, string(a.Value))
			}
			if whole != tt.wantWhole || (!whole && !slices.Equal(got, tt.want)) {
				t.Errorf("changedResources = %q, whole %v; want %q, whole %v", got, whole, tt.want, tt.wantWhole)
			}
		})
	}
}

// narrowingGenerator is the fake generator plus EndpointsNarrower: the
// names it says a request may have changed are the request's
// ServicesUpdated (the fake's cluster names are its hosts). It records the
// names it was asked to generate for EDS.
type narrowingGenerator struct {
	*fakeGenerator
	mu        sync.Mutex
	generated [][]string
}

func (g *narrowingGenerator) ChangedEndpoints(_ *proxypush.Proxy, watched []string, req *proxypush.PushRequest) ([]string, bool) {
	if req.Full || len(req.ServicesUpdated) == 0 {
		return nil, false
	}
	var out []string
	for _, n := range watched {
		if _, ok := req.ServicesUpdated[n]; ok {
			out = append(out, n)
		}
	}
	return out, true
}

func (g *narrowingGenerator) Generate(proxy *proxypush.Proxy, typeURL string, watched []string, req *proxypush.PushRequest) ([]*discovery.Resource, error) {
	if typeURL == xdsapi.EndpointType {
		g.mu.Lock()
		g.generated = append(g.generated, slices.Clone(watched))
		g.mu.Unlock()
	}
	return g.fakeGenerator.Generate(proxy, typeURL, watched, req)
}

func (g *narrowingGenerator) lastGenerated() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.generated) == 0 {
		return nil
	}
	return g.generated[len(g.generated)-1]
}

// With a generator that can narrow a request, an endpoints push generates
// only the named assignments, sends the changed ones, and keeps the whole
// set bookkept: a later full push that changes nothing is skipped, and an
// assignment that went away falls back to the whole set.
func TestSotWNarrowedEDS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := []string{"a", "b", "c"}
		gen := &narrowingGenerator{fakeGenerator: &fakeGenerator{}}
		env := newTestEnv(t, func(o *Options) { o.Generator, o.EndpointsNarrower = gen, gen })
		env.gen = gen.fakeGenerator
		c := env.connect(t, testNodeID)
		c.request(xdsapi.EndpointType, all, "", "")
		first := c.expect(xdsapi.EndpointType)
		c.ack(first, all)

		narrowed := func(hosts ...string) {
			req := &proxypush.PushRequest{Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}, ServicesUpdated: map[string]struct{}{}}
			for _, h := range hosts {
				req.ServicesUpdated[h] = struct{}{}
			}
			env.server.ConfigUpdate(req)
		}

		env.gen.bumpEndpoints("b")
		narrowed("b")
		r := c.expect(xdsapi.EndpointType)
		if got := claNames(t, r); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("EDS response = %q, want only b", got)
		}
		if got := gen.lastGenerated(); !slices.Equal(got, []string{"b"}) {
			t.Errorf("generated %q for the endpoints push, want only b", got)
		}
		c.ack(r, all)

		// A named service whose assignment did not change: nothing is sent.
		narrowed("c")
		c.expectNone(testDebounce + quietInterval)

		// The whole set's hash was kept up to date: a full push with nothing
		// changed since is skipped.
		fullPush(env)
		c.expectNone(testDebounce + quietInterval)

		// A named assignment that is no longer generated: the whole set.
		env.gen.setUnknownEDS("a")
		narrowed("a")
		r = c.expect(xdsapi.EndpointType)
		if got := claNames(t, r); !slices.Equal(got, []string{"b", "c"}) {
			t.Fatalf("EDS response after a went away = %q, want the whole set b, c", got)
		}
	})
}
