package xdsclient

import (
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// DefaultInitialFetchTimeout is Envoy's initial_fetch_timeout default.
const DefaultInitialFetchTimeout = 15 * time.Second

// InitialFetchTimeout is the initial_fetch_timeout of a subscription's
// config source cs: how long what waits for its first response (a warming
// cluster or listener, the server's initialization) waits before going on
// without it. Unset (or cs nil) is Envoy's default; 0 waits for ever.
func InitialFetchTimeout(cs *corev3.ConfigSource) (time.Duration, error) {
	t := cs.GetInitialFetchTimeout()
	if t == nil {
		return DefaultInitialFetchTimeout, nil
	}
	if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
		return 0, fmt.Errorf("initial_fetch_timeout %v is not a valid duration (want >= 0s; 0s waits for ever)", t)
	}
	return t.AsDuration(), nil
}
