// Package admin serves the proxy's admin endpoints (Envoy's admin API
// subset): /ready, /config_dump, /stats/prometheus, /stats, and the
// POST-only /drain_listeners and /quitquitquit, which answer loopback
// peers only.
package admin

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Source is what the admin server reports on.
type Source interface {
	// Ready reports whether the initial configuration has been applied.
	Ready() bool
	// Initializing reports, before Ready, whether the start-up is past
	// the clusters and waits for the listeners (Envoy's INITIALIZING; before
	// it, PRE_INITIALIZING).
	Initializing() bool
	// ConfigDump returns the current configuration, with what r asks for.
	ConfigDump(r DumpRequest) (*adminv3.ConfigDump, error)
	// Draining reports whether a drain started (/ready then says DRAINING).
	Draining() bool
	// DrainListeners starts draining listeners as r asks.
	DrainListeners(r DrainRequest)
	// Quit asks the proxy to exit.
	Quit()
}

// DrainRequest is a POST /drain_listeners: its query flags.
type DrainRequest struct {
	// InboundOnly: only the listeners with traffic_direction INBOUND.
	InboundOnly bool
	// Graceful: the listeners keep accepting for the drain time
	// (--drain-time-s), then stop, unless SkipExit; without it they stop
	// accepting at once.
	Graceful bool
	// SkipExit: a graceful drain does not stop the listeners at its end.
	SkipExit bool
}

// DumpRequest is a GET /config_dump: its query flags.
type DumpRequest struct {
	// IncludeEDS: the dump also holds the clusters' endpoints (an
	// EndpointsConfigDump), as Envoy's ?include_eds asks.
	IncludeEDS bool
}

// Server is a running admin server.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Options configure the admin server.
type Options struct {
	Address string
	Source  Source
	Stats   *stats.Store
	Logger  *slog.Logger
}

// Start binds the admin address and serves in the background.
func Start(o Options) (*Server, error) {
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, err
	}
	log := o.Logger.With("component", "admin")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		switch {
		case o.Source.Draining():
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("DRAINING\n"))
		case o.Source.Ready():
			w.Write([]byte("LIVE\n"))
		case o.Source.Initializing():
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("INITIALIZING\n"))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("PRE_INITIALIZING\n"))
		}
	})
	// Envoy's POST /drain_listeners[?inboundonly][&graceful[&skip_exit]]
	// (ListenersHandler::handlerDrainListeners in
	// source/server/admin/listeners_handler.cc).
	mux.HandleFunc("POST /drain_listeners", func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(w, r) {
			return
		}
		q := r.URL.Query()
		for name := range q {
			if name != "inboundonly" && name != "graceful" && name != "skip_exit" {
				http.Error(w, "/drain_listeners: parameter "+strconv.Quote(name)+" is not supported (want inboundonly, graceful, skip_exit)", http.StatusBadRequest)
				return
			}
		}
		d := DrainRequest{InboundOnly: q.Has("inboundonly"), Graceful: q.Has("graceful"), SkipExit: q.Has("skip_exit")}
		if d.SkipExit && !d.Graceful {
			http.Error(w, "skip_exit requires graceful", http.StatusBadRequest)
			return
		}
		log.Info("draining listeners", "inbound_only", d.InboundOnly, "graceful", d.Graceful, "skip_exit", d.SkipExit)
		o.Source.DrainListeners(d)
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.Write([]byte("OK\n"))
	})
	mux.HandleFunc("POST /quitquitquit", func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(w, r) {
			return
		}
		log.Info("quit requested")
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.Write([]byte("OK\n"))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		o.Source.Quit()
	})
	mux.HandleFunc("GET /config_dump", func(w http.ResponseWriter, r *http.Request) {
		// Envoy's include_eds (present, whatever its value) adds the
		// EndpointsConfigDump; resource, mask and name_regex select parts
		// of the dump, which this does not do: refused rather than ignored.
		var dr DumpRequest
		for name := range r.URL.Query() {
			if name != "include_eds" {
				http.Error(w, "/config_dump: parameter "+strconv.Quote(name)+" is not supported (only include_eds; the dump is always whole)", http.StatusBadRequest)
				return
			}
			dr.IncludeEDS = true
		}
		cd, err := o.Source.ConfigDump(dr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(cd)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	mux.HandleFunc("GET /stats/prometheus", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_ = o.Stats.WritePrometheus(w) // fails only when the scraper has gone
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") == "prometheus" {
			_ = o.Stats.WritePrometheus(w) // fails only when the client has gone
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_ = o.Stats.WriteText(w) // fails only when the client has gone
	})
	s := &Server{
		ln: ln,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server stopped", "error", err)
		}
	}()
	log.Info("admin listening", "address", ln.Addr().String())
	return s, nil
}

// fromLoopback answers 403 to a request that does not come from a loopback
// address: an admin bound beyond loopback must not let the network stop the
// proxy.
func fromLoopback(w http.ResponseWriter, r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err == nil && ap.Addr().IsLoopback() {
		return true
	}
	http.Error(w, "admin mutations are accepted from loopback only", http.StatusForbidden)
	return false
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}
