// Package status serves the agent's health and metrics endpoints:
// /healthz/ready (the kubelet's readiness probe, on 15021 and 15020) and
// /stats/prometheus on 15020, which merges the proxy's own stats, the
// agent's and the app's (appmetrics.go), as pilot-agent does.
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
	// AppTargets are the app's metrics endpoints on localhost (the pod's
	// prometheus.io/port and /path, from ISTIO_PROMETHEUS_ANNOTATIONS),
	// appended after the proxy's and the agent's metrics.
	AppTargets []AppTarget
	// Client fetches from the admin port (default: 2s timeout).
	Client *http.Client
	Logger *slog.Logger
}

// Server answers health and metrics requests. It is safe for concurrent use.
type Server struct {
	opts     Options
	log      *slog.Logger
	draining atomic.Bool
	// scrapes and failures are istio_agent_scrapes_total and
	// istio_agent_scrape_failures_total{type}.
	scrapes  atomic.Int64
	failures struct{ envoy, app, agent atomic.Int64 }
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

// serveMetrics merges the proxy's stats, the agent's metrics and the
// app's into one exposition, in that order (the app last: an OpenMetrics
// body ends the response with its "# EOF"). A source that cannot be
// scraped is left out, logged and counted, so Prometheus still gets the
// others (pilot-agent's handleStats answers the same way).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	s.scrapes.Add(1)
	format, apps := FormatText, [][]byte(nil)
	if len(s.opts.AppTargets) > 0 {
		format, apps = s.scrapeApp(r)
	}
	var buf bytes.Buffer
	proxyURL := s.opts.AdminURL + PrometheusPath
	if r.URL.RawQuery != "" {
		proxyURL += "?" + r.URL.RawQuery
	}
	if body, _, err := s.fetch(r, proxyURL, acceptFor(r.Header.Get("Accept"), proxyTypes), 1<<30); err != nil {
		s.failures.envoy.Add(1)
		s.log.Warn("scrape proxy stats", "error", err)
	} else {
		appendExposition(&buf, body)
	}
	if s.opts.AgentMetrics != nil {
		mark := buf.Len()
		if err := s.opts.AgentMetrics(&buf); err != nil {
			buf.Truncate(mark)
			s.failures.agent.Add(1)
			s.log.Warn("agent metrics", "error", err)
		}
	}
	s.writeScrapeMetrics(&buf)
	openMetrics := format != FormatText
	for _, body := range apps {
		if body == nil {
			continue
		}
		appendExposition(&buf, withoutEOF(body))
	}
	if openMetrics {
		buf.WriteString("# EOF\n")
	}
	w.Header().Set("Content-Type", format)
	_, _ = w.Write(buf.Bytes())
}

// writeScrapeMetrics writes pilot-agent's own counts of the merges it
// served and of the sources it could not scrape.
func (s *Server) writeScrapeMetrics(buf *bytes.Buffer) {
	fmt.Fprintf(buf, "# HELP istio_agent_scrapes_total The total number of scrapes.\n"+
		"# TYPE istio_agent_scrapes_total counter\nistio_agent_scrapes_total %d\n", s.scrapes.Load())
	buf.WriteString("# HELP istio_agent_scrape_failures_total The total number of failed scrapes.\n" +
		"# TYPE istio_agent_scrape_failures_total counter\n")
	for _, f := range []struct {
		typ string
		n   *atomic.Int64
	}{{"agent", &s.failures.agent}, {"application", &s.failures.app}, {"envoy", &s.failures.envoy}} {
		fmt.Fprintf(buf, "istio_agent_scrape_failures_total{type=%q} %d\n", f.typ, f.n.Load())
	}
}
