// Package wire holds what both ends of Strait's HTTP/2 connections (the
// downstream server, http2/server, and the upstream client, http2/client)
// do the same way on the wire: the receive window given back in
// WINDOW_UPDATEs, header blocks split into HEADERS and CONTINUATION
// frames and read back whole (HeaderReader, with x/net's ReadMetaHeaders
// checks), and header names lowered for HPACK.
package wire
