// Command strait-echo is the small application the demo and the end-to-end
// tests run behind the sidecars: it answers every request with a JSON
// document that says which version it is and whom it saw as the client.
//
// Tests steer it with request headers:
//
//	x-echo-status: N         answer with status N
//	x-echo-delay: D          wait D (a Go duration) before answering
//	x-echo-fail: N           with x-echo-key: K, the first N requests with key K
//	                         answer x-echo-fail-status (default 503); later ones 200
//	x-echo-response-header: NAME=VALUE   set a response header (repeatable)
//	x-echo-call: URL         GET URL first (as bookinfo's reviews calls ratings),
//	                         passing on end-user and x-request-id; the answer's
//	                         "call" has its status and version, or its error
//
// GET /_echo/count?key=K reports how many requests carried key K and the
// Host of the last one, so a test can count attempts (retries, mirrors) and
// see where they were addressed (a mirror's "-shadow" host). The --status flag makes every
// answer that status (a bad host for outlier detection tests).
//
// --metrics-addr ADDR serves the echo's own Prometheus metrics there, on
// any path: strait_echo_requests_total{code}, the requests it answered.
//
// `strait-echo get [-n N] [-interval D] URL` is the client instead: N GETs,
// one JSON line each (status and the echo's reply, or the error), for
// tests that exec into a pod.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Reply is what strait-echo answers to every request.
type Reply struct {
	Version string `json:"version"`
	Pod     string `json:"pod,omitempty"`
	Remote  string `json:"remote"`
	Host    string `json:"host"`
	Path    string `json:"path"`
	// RawPath is the path as the request line wrote it, escapes kept
	// (Path is decoded), for tests of what a proxy forwarded.
	RawPath string            `json:"rawPath"`
	Query   string            `json:"query,omitempty"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers,omitempty"`
	// Attempt counts the requests seen with this request's x-echo-key,
	// this one included (0 without a key).
	Attempt int `json:"attempt,omitempty"`
	// Call is the outcome of the x-echo-call request, when there was one.
	Call *CallReply `json:"call,omitempty"`
	// TLSServerName is the SNI of a request that came over TLS
	// (--tls-cert), "" for none or plaintext: a test of TLS origination
	// sees what the originating proxy sent.
	TLSServerName string `json:"tlsServerName,omitempty"`
}

// CallReply is what came of the GET that x-echo-call asked for.
type CallReply struct {
	Status  int    `json:"status,omitempty"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

// call makes the x-echo-call GET for r; it ends with r's context. It
// passes on the user and the request id, as bookinfo's services do.
func call(r *http.Request, url string) *CallReply {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, url, nil)
	if err != nil {
		return &CallReply{Error: err.Error()}
	}
	for _, h := range []string{"End-User", "X-Request-Id"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return &CallReply{Error: err.Error()}
	}
	defer resp.Body.Close()
	out := &CallReply{Status: resp.StatusCode}
	var rep Reply
	if json.NewDecoder(resp.Body).Decode(&rep) == nil {
		out.Version = rep.Version
	}
	return out
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "strait-echo:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "get" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return runGet(ctx, args[1:], os.Stdout)
	}
	fs := flag.NewFlagSet("strait-echo", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "address to listen on; several separated by commas (one server on each)")
	version := fs.String("version", "v1", "version string to report")
	pod := fs.String("pod", os.Getenv("POD_NAME"), "pod name to report")
	status := fs.Int("status", 0, "answer every request with this status (0: 200, or as the request asks)")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate chain (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "the PEM private key of --tls-cert")
	metricsAddr := fs.String("metrics-addr", "", "serve the echo's Prometheus metrics on this address (any path)")
	next := fs.String("next", "", "call this URL with the trace headers of each request before answering it (next.go)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	var lns []net.Listener
	for _, a := range strings.Split(*addr, ",") {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("listen %s: %w", a, err)
		}
		lns = append(lns, ln)
	}
	handler := newHandler(*version, *pod, *status)
	if *next != "" {
		handler = withNext(handler, *next)
	}
	var servers []*http.Server
	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("listen %s: %w", *metricsAddr, err)
		}
		m := newAppMetrics()
		handler = m.count(handler)
		msrv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, msrv)
		go func() { _ = msrv.Serve(ln) }()
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	servers = append(servers, srv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(shutdownCtx)
		}
	}()
	errs := make(chan error, len(lns))
	for _, ln := range lns {
		slog.Info("serving", "component", "echo", "addr", ln.Addr().String(), "version", *version)
		if *tlsCert != "" {
			go func() { errs <- srv.ServeTLS(ln, *tlsCert, *tlsKey) }()
			continue
		}
		go func() { errs <- srv.Serve(ln) }()
	}
	// The first server to stop (Shutdown stops them all) decides.
	if err := <-errs; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// keyCount is the answer of /_echo/count.
type keyCount struct {
	Count int    `json:"count"`
	Host  string `json:"host,omitempty"`
}

// handler is the echo handler with no forced status.
func handler(version, pod string) http.Handler { return newHandler(version, pod, 0) }

func newHandler(version, pod string, status int) http.Handler {
	var mu sync.Mutex
	counts := map[string]int{}
	hosts := map[string]string{} // the last Host seen per key
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_echo/count" {
			key := r.URL.Query().Get("key")
			mu.Lock()
			c := keyCount{Count: counts[key], Host: hosts[key]}
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(c)
			return
		}
		rep := Reply{Version: version, Pod: pod, Remote: r.RemoteAddr, Host: r.Host, Path: r.URL.Path,
			RawPath: r.URL.EscapedPath(), Query: r.URL.RawQuery, Method: r.Method, Headers: map[string]string{}}
		if r.TLS != nil {
			rep.TLSServerName = r.TLS.ServerName
		}
		for k := range r.Header {
			rep.Headers[k] = r.Header.Get(k)
		}
		code := http.StatusOK
		if key := r.Header.Get("X-Echo-Key"); key != "" {
			mu.Lock()
			counts[key]++
			hosts[key] = r.Host
			rep.Attempt = counts[key]
			mu.Unlock()
			if n, err := strconv.Atoi(r.Header.Get("X-Echo-Fail")); err == nil && rep.Attempt <= n {
				code = http.StatusServiceUnavailable
				if fs, err := strconv.Atoi(r.Header.Get("X-Echo-Fail-Status")); err == nil && fs >= 200 && fs <= 599 {
					code = fs
				}
			}
		}
		if s, err := strconv.Atoi(r.Header.Get("X-Echo-Status")); err == nil && s >= 200 && s <= 599 {
			code = s
		}
		if status != 0 {
			code = status
		}
		if url := r.Header.Get("X-Echo-Call"); url != "" {
			rep.Call = call(r, url)
			if r.Context().Err() != nil {
				return // the client left while the call was out
			}
		}
		if d, err := time.ParseDuration(r.Header.Get("X-Echo-Delay")); err == nil && d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		for _, kv := range r.Header.Values("X-Echo-Response-Header") {
			if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
				w.Header().Add(name, value)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Version", version)
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(rep)
	})
}
