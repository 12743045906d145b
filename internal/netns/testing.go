package netns

import (
	"context"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// NewTestNetwork creates a Network for t and closes it when t ends (and on
// SIGINT/SIGTERM). It skips t when Available reports a problem (not root,
// `ip` or `nsenter` missing) and fails it if the network cannot be made.
func NewTestNetwork(t testing.TB) *Network {
	t.Helper()
	testreq.Privileged(t, "network namespaces")
	if err := Available(); err != nil {
		testreq.Missing(t, "needs network namespaces: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := NewNetwork(ctx, NetworkOptions{})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	stop := n.CloseOnSignal()
	t.Cleanup(func() {
		stop()
		if err := n.Close(); err != nil {
			t.Errorf("testenv: close network: %v", err)
		}
	})
	return n
}

// AddTestPod is AddPod for tests: it fails t on error.
func (n *Network) AddTestPod(t testing.TB, name string) *Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := n.AddPod(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
