package xds

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/metadata"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestAuthenticateHook: Authenticate runs with the stream's context (its
// metadata) when the stream opens, and its identity is the proxy's when
// Authorize runs; an error leaves the proxy without an identity and the
// stream running.
func TestAuthenticateHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu   sync.Mutex
			seen = map[string]*proxypush.Identity{}
		)
		env := newTestEnv(t, func(o *Options) {
			o.Authenticate = func(ctx context.Context) (*proxypush.Identity, error) {
				md, _ := metadata.FromIncomingContext(ctx)
				switch v := md.Get("x-test-account"); {
				case len(v) == 0:
					return nil, nil
				case v[0] == "bad":
					return nil, errors.New("token review: not authenticated")
				default:
					return &proxypush.Identity{Namespace: "demo", ServiceAccount: v[0]}, nil
				}
			}
			o.Authorize = func(p *proxypush.Proxy) error {
				mu.Lock()
				seen[p.PodName] = p.Identity
				mu.Unlock()
				return nil
			}
		})
		for _, tc := range []struct{ pod, account string }{{"gw", "gw-istio"}, {"anon", ""}, {"forged", "bad"}} {
			var opts []string
			if tc.account != "" {
				opts = []string{"x-test-account", tc.account}
			}
			c := env.connectWith(t, "router~10.1.0.9~"+tc.pod+".demo~demo.svc.cluster.local", opts...)
			c.request(xdsapi.ClusterType, nil, "", "")
			c.expect(xdsapi.ClusterType)
		}
		mu.Lock()
		defer mu.Unlock()
		if id := seen["gw"]; id == nil || *id != (proxypush.Identity{Namespace: "demo", ServiceAccount: "gw-istio"}) {
			t.Errorf("gw: identity %+v, want demo/gw-istio", id)
		}
		for _, pod := range []string{"anon", "forged"} {
			if id, ok := seen[pod]; !ok || id != nil {
				t.Errorf("%s: identity %+v (seen %t), want none", pod, id, ok)
			}
		}
	})
}
