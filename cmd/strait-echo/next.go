package main

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// traceHeaders are the request headers an application must copy from the
// request it serves to the requests it makes, so that the mesh's spans
// join into one trace (Istio's "Distributed tracing" FAQ): the request
// id, B3 (multi-header and single) and W3C trace context.
var traceHeaders = []string{
	"X-Request-Id", "X-B3-Traceid", "X-B3-Spanid", "X-B3-Parentspanid", "X-B3-Sampled", "X-B3-Flags", "B3",
	"Traceparent", "Tracestate",
}

// withNext makes h call next (a URL, through the pod's sidecar) with the
// trace headers of each request before answering it, as an application
// in the middle of a call chain does; a failed call is answered 502.
func withNext(h http.Handler, next string) http.Handler {
	client := &http.Client{Timeout: 10 * time.Second}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, k := range traceHeaders {
			if v := r.Header.Values(k); len(v) > 0 {
				req.Header[k] = v
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, fmt.Sprintf("next hop %s: %v", next, err), http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body) // the next hop's answer is not relayed
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			http.Error(w, fmt.Sprintf("next hop %s: %s", next, resp.Status), http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	})
}
