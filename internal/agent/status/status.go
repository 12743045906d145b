// Package status serves the agent's health and metrics endpoints:
// /healthz/ready (the kubelet's readiness probe, on 15021 and 15020) and
// /stats/prometheus on 15020, which merges the proxy's own stats with the
// agent's.
package status

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Paths served.
const (
	ReadyPath      = "/healthz/ready"
	PrometheusPath = "/stats/prometheus"
)

// Options configure a Server.
type Options struct {
	// AdminURL is the proxy's admin base URL, e.g. "http://127.0.0.1:15000".
	AdminURL string
	// XDSSynced, if set, adds the xDS relay's CDS/LDS ACK state to the
	// not-ready reason.
	XDSSynced func() (cds, lds bool)
	// DNSReady, if set, must return nil for the pod to be ready (the DNS
	// proxy waits for its first name table).
	DNSReady func() error
	// AgentMetrics, if set, appends the agent's metrics (Prometheus text)
	// to the proxy's on /stats/prometheus.
	AgentMetrics func(io.Writer) error
	// Client fetches from the admin port (default: 2s timeout).
	Client *http.Client
	Logger *slog.Logger
}

// Server answers health and metrics requests. It is safe for concurrent use.
type Server struct {
	opts     Options
	log      *slog.Logger
	draining atomic.Bool
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 2 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{opts: opts, log: opts.Logger.With("component", "status")}
}

// SetDraining makes readiness fail from now on, so the endpoint is taken
// out of load balancing before the proxy stops.
func (s *Server) SetDraining() { s.draining.Store(true) }

// DrainInbound asks the proxy to drain its inbound listeners while they
// keep accepting (POST /drain_listeners?inboundonly&graceful on its
// admin port), as Istio's pilot-agent does when the pod terminates: its
// keep-alive connections close after their current response, so clients
// move to other endpoints before the proxy exits.
func (s *Server) DrainInbound(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.AdminURL+"/drain_listeners?inboundonly&graceful", nil)
	if err != nil {
		return err
	}
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("drain the proxy's inbound listeners: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("drain the proxy's inbound listeners: admin answered %s", resp.Status)
	}
	return nil
}

// Ready returns nil when the proxy is ready to take traffic, else why not.
func (s *Server) Ready(ctx context.Context) error {
	if s.draining.Load() {
		return errors.New("draining: the agent is shutting down")
	}
	if s.opts.DNSReady != nil {
		if err := s.opts.DNSReady(); err != nil {
			return err
		}
	}
	body, code, err := s.getAdmin(ctx, "/ready")
	if err != nil {
		return fmt.Errorf("proxy admin not reachable: %w%s", err, s.xdsState())
	}
	if code != http.StatusOK {
		return fmt.Errorf("proxy not ready: admin /ready returned %d %q%s", code, strings.TrimSpace(string(body)), s.xdsState())
	}
	return nil
}

func (s *Server) xdsState() string {
	if s.opts.XDSSynced == nil {
		return ""
	}
	cds, lds := s.opts.XDSSynced()
	return fmt.Sprintf("; xds: CDS acked=%t, LDS acked=%t", cds, lds)
}

func (s *Server) getAdmin(ctx context.Context, path string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opts.AdminURL+path, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, err
	}
	return body, resp.StatusCode, nil
}

// ReadyHandler serves only /healthz/ready (the 15021 port).
func (s *Server) ReadyHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ReadyPath, s.serveReady)
	return mux
}

// Handler serves /healthz/ready and /stats/prometheus (the 15020 port).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ReadyPath, s.serveReady)
	mux.HandleFunc("GET "+PrometheusPath, s.serveMetrics)
	return mux
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.Ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ready")
}

// serveMetrics concatenates the proxy's stats and the agent's. When the
// proxy cannot be scraped the agent's metrics are still served.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	body, code, err := s.getAdmin(r.Context(), PrometheusPath)
	switch {
	case err != nil:
		s.log.Warn("scrape proxy stats", "error", err)
	case code != http.StatusOK:
		s.log.Warn("scrape proxy stats", "status", code)
	default:
		buf.Write(body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	if s.opts.AgentMetrics != nil {
		if err := s.opts.AgentMetrics(&buf); err != nil {
			http.Error(w, "agent metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(buf.Bytes())
}
