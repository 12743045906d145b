// Package debugserve serves a process's Go runtime figures and pprof
// profiles on a loopback address: what bench/sidecar reads from
// strait-agent and strait-proxy (heap in use, goroutines, heap profiles).
// It is off unless the process is given an address, and it refuses any
// address that is not loopback: profiles name code paths and hold
// configuration strings, so they are never served on the pod's network.
//
// Heap profiling is off with it: a process that serves no debug endpoint
// has no reader for the runtime's allocation samples, so FromEnv sets
// runtime.MemProfileRate to 0 and the runtime neither samples allocations
// nor keeps a profile bucket per sampled call stack (bench/README.md,
// "Sidecar memory and start", sixth round).
package debugserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"time"
)

// Listen listens on addr (host:port), which must name a loopback address
// (127.0.0.0/8 or ::1; "localhost" is refused, as it can resolve to
// anything).
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("debug address %q: %w", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("debug address %q: want a loopback IP address such as 127.0.0.1:6060", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug address: %w", err)
	}
	return lis, nil
}

// Handler serves /debug/pprof/NAME, runtime/pprof's named profiles (heap,
// allocs, goroutine, ...; ?debug=N and heap's ?gc=1 as net/http/pprof
// takes them), and
// /debug/runtime: every scalar metric of runtime/metrics as one JSON
// object, name to value (e.g. "/gc/heap/live:bytes",
// "/sched/goroutines:goroutines"). It does not use net/http/pprof, whose
// CPU profiles and execution traces would add half a megabyte to each
// binary, and so to every sidecar's resident text.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := pprof.Lookup(r.PathValue("name"))
		if p == nil {
			http.Error(w, "no such profile", http.StatusNotFound)
			return
		}
		if r.PathValue("name") == "heap" && r.URL.Query().Get("gc") != "" {
			runtime.GC() // as net/http/pprof's ?gc=1: the profile is as of now, not of the last cycle
		}
		debug, _ := strconv.Atoi(r.URL.Query().Get("debug"))
		if debug == 0 {
			w.Header().Set("Content-Type", "application/octet-stream")
		} else {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		_ = p.WriteTo(w, debug) // a write error means the client went away
	})
	mux.HandleFunc("GET /debug/runtime", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(RuntimeMetrics()) // a write error means the client went away
	})
	return mux
}

// RuntimeMetrics reads every scalar (uint64 or float64) runtime metric.
func RuntimeMetrics() map[string]float64 {
	descs := metrics.All()
	samples := make([]metrics.Sample, 0, len(descs))
	for _, d := range descs {
		if d.Kind == metrics.KindUint64 || d.Kind == metrics.KindFloat64 {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	out := make(map[string]float64, len(samples))
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			out[s.Name] = float64(s.Value.Uint64())
		case metrics.KindFloat64:
			out[s.Name] = s.Value.Float64()
		}
	}
	return out
}

// FromEnv starts the debug server on the loopback address in the
// environment variable name (read with getenv), or, when that is empty,
// turns heap profiling off for the rest of the process's life
// (runtime.MemProfileRate = 0). With an address, heap profiling stays as
// the runtime set it: sampling every 512 KiB allocated on average, or
// GODEBUG=memprofilerate=N's rate. The caller calls stop when it is done
// (a no-op when no server runs). Call it early in main: allocations
// sampled before it keep their profile records. A nil log means
// slog.Default().
func FromEnv(getenv func(string) string, name string, log *slog.Logger) (stop func(), err error) {
	addr := getenv(name)
	if addr == "" {
		runtime.MemProfileRate = 0
		return func() {}, nil
	}
	lis, err := Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := Start(lis, log)
	return func() { _ = s.Close() }, nil // a shutdown past its second only cuts a profile download short
}

// Server is a running debug server.
type Server struct {
	srv  *http.Server
	done chan struct{}
}

// Start serves Handler on lis until Close; a serve error is logged.
func Start(lis net.Listener, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{srv: &http.Server{Handler: Handler(), ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug server stopped", "component", "debugserve", "error", err)
		}
	}()
	log.Info("serving debug endpoints", "component", "debugserve", "addr", lis.Addr().String())
	return s
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}
