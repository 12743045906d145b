package forward

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// TestFailureMapping: Envoy's local replies for pick and connect
// failures (503 UO with the overflow body when a circuit breaker is open,
// else UH / UF), and the outlier detector's view of each local reply by
// its first response flag.
func TestFailureMapping(t *testing.T) {
	overflow := fmt.Errorf("pick: %w", cluster.ErrOverflow)
	other := errors.New("no endpoint")
	for _, c := range []struct {
		name string
		got  Failure
		want Failure
	}{
		{"pick overflow", PickFailure(overflow), Failure{503, "UO", BodyOverflow}},
		{"pick other", PickFailure(other), Failure{503, "UH", BodyNoHealthy}},
		{"connect overflow", ConnectFailure(overflow), Failure{503, "UO", BodyOverflow}},
		{"connect other", ConnectFailure(other), FailConnect},
	} {
		if c.got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		f    Failure
		want cluster.LocalFailure
	}{
		{FailConnect, cluster.LocalConnectFailed},
		{Failure{503, "UF,URX", ""}, cluster.LocalConnectFailed},
		{FailRouteTimeout, cluster.LocalTimeout},
		{FailTerminated, cluster.LocalReset},
		{FailProtocol, cluster.LocalReset},
		{FailClientGone, 0},
		{FailStreamIdle, 0},
		{FailRequestTimeout, 0},
		{FailBadRequest, 0},
		{Failure{503, "UO", BodyOverflow}, 0},
		{Failure{503, "URX,UF", ""}, 0},
	} {
		if got := LocalFailureOf(c.f); got != c.want {
			t.Errorf("LocalFailureOf(%q) = %v, want %v", c.f.Flags, got, c.want)
		}
	}
}

// TestReportRetriedFailure: a retried attempt's upstream failure counts
// for outlier detection (here consecutive_5xx 1 ejects at once); one that
// was not the upstream's doing (the client left) does not.
func TestReportRetriedFailure(t *testing.T) {
	c := hopStaticCluster("od", "127.0.0.1:1")
	c.OutlierDetection = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(1),
		EnforcingSuccessRate: wrapperspb.UInt32(0), MaxEjectionPercent: wrapperspb.UInt32(100)}
	cm, _ := hopManager(t, c)
	cl := cm.Get("od")
	ep, err := cl.Pick(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	ejections := func() uint64 { return cl.Stats.Counter("outlier_detection.ejections_enforced_total").Load() }
	for _, f := range []Failure{FailClientGone, FailStreamIdle, FailBadRequest} {
		ReportRetriedFailure(cl, ep, f)
	}
	if n := ejections(); n != 0 {
		t.Fatalf("ejections after failures that are not the upstream's: %d, want 0", n)
	}
	ReportRetriedFailure(cl, ep, FailConnect)
	if n := ejections(); n != 1 {
		t.Errorf("ejections after a connect failure: %d, want 1", n)
	}
}
