// Package admin serves the proxy's admin endpoints (Envoy's admin API
// subset): /ready, /config_dump, /stats/prometheus and /stats.
package admin

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Source is what the admin server reports on.
type Source interface {
	// Ready reports whether the initial configuration has been applied.
	Ready() bool
	// ConfigDump returns the current configuration.
	ConfigDump() (*adminv3.ConfigDump, error)
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
		if o.Source.Ready() {
			w.Write([]byte("LIVE\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("PRE_INITIALIZING\n"))
	})
	mux.HandleFunc("GET /config_dump", func(w http.ResponseWriter, _ *http.Request) {
		cd, err := o.Source.ConfigDump()
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
		o.Stats.WritePrometheus(w)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") == "prometheus" {
			o.Stats.WritePrometheus(w)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		o.Stats.WriteText(w)
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

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}
