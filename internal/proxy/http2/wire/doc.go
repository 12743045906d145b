// Package wire holds what both ends of Strait's HTTP/2 connections (the
// downstream server, http2/server, and the upstream client, http2/client)
// do the same way on the wire: flow control (window.go: the send and
// receive windows of a connection and of its streams, the WINDOW_UPDATE
// thresholds and the bound past which a window is a FLOW_CONTROL_ERROR),
// the keepalive's checks and our PINGs' payloads (keepalive.go), header
// blocks split into HEADERS and CONTINUATION frames and read back whole
// (HeaderReader, with x/net's ReadMetaHeaders checks), and header names
// lowered for HPACK and canonicalized for http.Header, and the pool of
// body buffers both take from (bodybuf.go). The types hold
// state only: the connection that embeds them guards them with its lock
// and owns its timers and goroutines.
package wire
