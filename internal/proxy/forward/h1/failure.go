package h1

// This file is how a failed exchange is told apart: the errors of the
// wait for a response head, the local reply each becomes (as Envoy's
// router answers them), and which failures a retry on a new connection may
// follow.

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/router"
)

var (
	errRouteTimeout  = errors.New("route timeout")
	errStreamIdle    = errors.New("stream idle timeout")
	errClientGone    = errors.New("client closed the connection")
	errSwitched      = errors.New("upstream switched protocols without an upgrade request")
	errRetryNotWrite = errors.New("request not written")
	errRetryConnect  = errors.New("connect failed")
)

// classify maps an upstream failure before a response head to the local
// reply Envoy sends.
func classify(err error) forward.Failure {
	switch {
	case errors.Is(err, errRouteTimeout):
		return forward.FailRouteTimeout
	case errors.Is(err, errStreamIdle):
		return forward.FailStreamIdle
	case errors.Is(err, errClientGone):
		return forward.FailClientGone
	case errors.Is(err, http1.ErrMalformed), errors.Is(err, http1.ErrHeaderTooLarge),
		errors.Is(err, http1.ErrTooManyHeaders), errors.Is(err, errSwitched):
		return forward.FailProtocol
	}
	return forward.FailTerminated
}

// retryEndpoint counts a retry and chooses its endpoint.
func (x *Exchange) retryEndpoint(cl *cluster.Cluster, r *router.Retry, tried []string, prev cluster.Endpoint) cluster.Endpoint {
	cl.Stats.Router.Retry.Add(1)
	return forward.Repick(cl, r, x.Dst, x.Src, tried, prev)
}

// grpcStatusOf returns a response's grpc-status, -1 when absent.
func grpcStatusOf(v []byte, ok bool) int {
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return -1
	}
	return n
}

// ReasonPhrase is the reason phrase of a status line the proxy writes.
func ReasonPhrase(code int) string {
	switch code {
	case 200:
		return "OK"
	case 404:
		return "Not Found"
	case 503:
		return "Service Unavailable"
	}
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status"
}
