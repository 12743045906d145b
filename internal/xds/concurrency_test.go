package xds

import (
	"fmt"
	"sync"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestManyConnectionsConcurrentUpdates pushes a burst of concurrent config
// updates to many connections through a small push throttle (run with
// -race): every connection must converge on the generator's final content,
// and no push may be lost or sent to the wrong stream.
func TestManyConnectionsConcurrentUpdates(t *testing.T) {
	const (
		clients = 12
		updates = 40
	)
	env := newTestEnv(t, func(o *Options) { o.PushThrottle = 2 })
	cs := make([]*adsClient, clients)
	for i := range cs {
		cs[i] = env.connect(t, fmt.Sprintf("sidecar~10.1.0.%d~pod%d.demo~demo.svc.cluster.local", i+1, i))
		cs[i].request(xdsapi.ClusterType, nil, "", "")
		cs[i].ack(cs[i].expect(xdsapi.ClusterType), nil)
	}
	eventually(t, "all connected", func() bool { return len(env.server.Connections()) == clients })

	var wg sync.WaitGroup
	for i := range updates {
		wg.Go(func() {
			env.gen.bump()
			env.server.ConfigUpdate(&proxypush.PushRequest{Full: i%2 == 0, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}})
		})
	}
	wg.Wait()
	// The last debounced batch might hold only endpoint updates; one more
	// full update makes the final CDS push certain.
	env.server.ConfigUpdate(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.GlobalUpdate}})
	want := fmt.Sprint(updates)

	var cwg sync.WaitGroup
	errs := make(chan error, clients)
	for _, c := range cs {
		cwg.Go(func() {
			deadline := time.After(waitFor)
			for {
				select {
				case r := <-c.resps:
					if r.TypeUrl != xdsapi.ClusterType {
						errs <- fmt.Errorf("got %s, want only CDS", typeLabel(r.TypeUrl))
						return
					}
					var cl cluster.Cluster
					if err := r.Resources[0].UnmarshalTo(&cl); err != nil {
						errs <- err
						return
					}
					// ACK from this goroutine only; the stream is not shared.
					if err := c.stream.Send(ackOf(r)); err != nil {
						errs <- err
						return
					}
					if cl.AltStatName == want {
						return
					}
				case <-deadline:
					errs <- fmt.Errorf("did not converge on content %s", want)
					return
				}
			}
		})
	}
	cwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	eventually(t, "all synced", func() bool {
		for _, s := range env.server.SyncStatuses() {
			if len(s.Types) != 1 || !s.Types[0].Synced {
				return false
			}
		}
		return true
	})
}
