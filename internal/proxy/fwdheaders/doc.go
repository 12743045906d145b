// Package fwdheaders holds the request headers an HTTP connection manager
// writes for the next hop, as Envoy's ConnectionManagerUtility
// (source/common/http/conn_manager_utility.cc) does before a request is
// routed: the client's address and x-forwarded-for (XFF, with the
// x-envoy-* headers an external request loses), x-forwarded-client-cert
// (XFCC), and x-forwarded-proto with the request's scheme (Proto). Each
// policy is read from the
// HttpConnectionManager once, is immutable, and applies to a request on
// either codec: ApplyH1 edits the HTTP/1.1 codec's parsed fields in place
// (no allocation unless a header is added), ApplyHTTP an http.Request
// (HTTP/2); the HTTP/1.1 codec writes x-forwarded-proto with the head it
// sends upstream. Package hcm calls them for every request.
package fwdheaders
