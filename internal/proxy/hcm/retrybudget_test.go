package hcm

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestRetryBudget: a cluster's retry_budget, not its max_retries, bounds
// the retries in flight. A budget of 0 % with no minimum refuses the
// retry of a 503 (max_retries 10 would allow it); 100 % admits it, the
// failing request itself being active. On every codec.
func TestRetryBudget(t *testing.T) {
	for _, codec := range codecs {
		for _, tc := range []struct {
			percent     float64
			wantStatus  int
			wantAttempt string
			wantOver    uint64
		}{{0, 503, "attempt=1 ", 1}, {100, 200, "attempt=2 ", 0}} {
			t.Run(fmt.Sprintf("%s/%v%%", codec, tc.percent), func(t *testing.T) {
				be := routerBackend(t, true)
				cl := staticCluster("be", be.Listener.Addr().String())
				cl.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
					MaxRetries: wrapperspb.UInt32(10),
					RetryBudget: &clusterv3.CircuitBreakers_Thresholds_RetryBudget{
						BudgetPercent:       &typev3.Percent{Value: tc.percent},
						MinRetryConcurrency: wrapperspb.UInt32(0),
					},
				}}}
				addr, st := startH2ProxyStats(t, codec, routerRoutes("be"), nil, cl)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				req, _ := http.NewRequest("POST", "http://"+addr+"/retry", strings.NewReader("payload"))
				req.Header.Set("X-Key", t.Name())
				req.Header.Set("X-Fail", "1")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantAttempt) {
					t.Errorf("%d %q, want %d after %s", resp.StatusCode, body, tc.wantStatus, tc.wantAttempt)
				}
				if got := st.Cluster("be").Counter("upstream_rq_retry_overflow").Load(); got != tc.wantOver {
					t.Errorf("upstream_rq_retry_overflow = %d, want %d", got, tc.wantOver)
				}
			})
		}
	}
}
