// Package forward is the router's upstream exchange that every codec
// shares: the local replies of an exchange that got no response
// (Failure), the retry circuit breaker's slot, the wait and the endpoint
// of a retry, the whole retried exchange of an http.Request (RoundTrip,
// for HTTP/2 streams and HTTP/1.1 requests to an HTTP/2 cluster), the
// request hash of a route's hash_policy, the downstream addresses an
// upstream PROXY protocol header carries, hop-by-hop header removal,
// which trailers cross the proxy (Trailers), and request mirroring
// (Shadowing).
//
// Package router decides (retry policy, rewrites, header mutations);
// package forward carries the decisions out against package cluster's
// connections. It never imports the connection manager (package hcm),
// which calls it. The HTTP/1.1 request's own exchange (writing the head
// on the upstream connection, copying the body, the retry loop, HTTP/1.1
// to HTTP/2, upgrades) is package forward/h1.
package forward
