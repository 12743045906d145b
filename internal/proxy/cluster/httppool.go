package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"
)

// httpPool is a cluster's HTTP/1.1 upstream connection pool, keyed by
// endpoint address, with keep-alive. It is behind RoundTrip so the codec can
// be replaced without touching callers.
type httpPool struct {
	t *http.Transport
}

func newHTTPPool(c *Cluster) *httpPool {
	t := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.Dial(ctx, Endpoint{Network: "tcp", Address: addr})
		},
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   4096,
		IdleConnTimeout:       60 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
		WriteBufferSize:       16 << 10,
		ReadBufferSize:        16 << 10,
		ExpectContinueTimeout: 0,
	}
	return &httpPool{t: t}
}

// ErrPipeEndpoint is returned for HTTP requests to a unix-socket endpoint.
var ErrPipeEndpoint = errors.New("pipe endpoints are not supported for HTTP upstreams")

// RoundTrip sends req (whose URL host the pool rewrites to ep) upstream.
// The caller owns the response body.
func (c *Cluster) RoundTrip(req *http.Request, ep Endpoint) (*http.Response, error) {
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	req.URL.Host = ep.Address
	return c.pool.t.RoundTrip(req)
}

func (p *httpPool) closeIdle() { p.t.CloseIdleConnections() }
