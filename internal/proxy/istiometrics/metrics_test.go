package istiometrics

import (
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// A dropped metric (the Telemetry API's disabled) is neither a family of
// the store nor recorded; the others are.
func TestDropped(t *testing.T) {
	st := stats.New()
	h, err := NewHTTP(st, RequestDuration)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := NewTCP(st, TCPSentBytes, TCPConnectionsDone)
	if err != nil {
		t.Fatal(err)
	}
	if h.Duration != nil || h.Requests == nil || tcp.Sent != nil || tcp.Closed != nil || tcp.Received == nil || tcp.Opened == nil {
		t.Fatalf("vecs: %+v %+v", h, tcp)
	}
	var e Exchange
	e.GRPCStatus = -1
	h.Record(AppendHTTP(nil, &e), 3, 10, 20)
	var b strings.Builder
	if err := st.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, RequestDuration) || strings.Contains(out, TCPSentBytes) || strings.Contains(out, TCPConnectionsDone) {
		t.Errorf("a dropped metric is exported:\n%s", out)
	}
	if !strings.Contains(out, RequestsTotal+"{") || !strings.Contains(out, RequestBytes+"_count{") {
		t.Errorf("the kept metrics are missing:\n%s", out)
	}
	for _, n := range []string{RequestsTotal, RequestMessages, TCPConnectionsOpen} {
		if !Known(n) {
			t.Errorf("Known(%s) = false", n)
		}
	}
	if Known("istio_custom_total") {
		t.Error("a custom metric is known")
	}
}
