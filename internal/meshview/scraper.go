package meshview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/debugapi"
)

// ProxySource lists the proxies connected to straitd (xds.Server).
type ProxySource interface {
	Connections() []debugapi.ConnectionStatus
}

// Options configure a Scraper. Zero values take the defaults named.
type Options struct {
	// Proxies lists whom to scrape. Required.
	Proxies ProxySource
	// Port is the proxies' Prometheus port (15090, the proxy's own stats
	// listener, which every sidecar and gateway serves on all addresses).
	Port int
	// Interval between two scrapes of every proxy (5s).
	Interval time.Duration
	// Window is how far back rates look (1m, Kiali's default duration).
	Window time.Duration
	// IdleAfter stops scraping when nobody has looked at the page for that
	// long (5m): straitd does not scrape a large mesh for no one.
	IdleAfter time.Duration
	// Timeout bounds one proxy's scrape (3s).
	Timeout time.Duration
	// Concurrency bounds the scrapes in flight (8).
	Concurrency int
	// MaxBytes bounds one scrape's body (32 MiB).
	MaxBytes int64
	// Client makes the requests (a client with no proxy from the
	// environment when nil).
	Client *http.Client
	// Logger: nil discards.
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Port == 0 {
		o.Port = 15090
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Window <= 0 {
		o.Window = time.Minute
	}
	if o.IdleAfter <= 0 {
		o.IdleAfter = 5 * time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 32 << 20
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: 30 * time.Second}}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ScrapeStatus is the last scrape of one proxy.
type ScrapeStatus struct {
	ProxyID string
	URL     string
	At      time.Time
	Err     string
}

// Scraper scrapes the connected proxies' istio_* metrics while the page is
// viewed and keeps each proxy's scrapes of the last window. Run owns the
// scraping; Viewed, Graph and Statuses are safe from any goroutine.
type Scraper struct {
	// Set at creation, read-only.
	opts Options
	wake chan struct{}

	mu sync.Mutex // guards the fields below
	// lastView is when the page was last served.
	lastView time.Time
	// history holds each proxy's scrapes within the window, oldest first,
	// by node id.
	history map[string][]ProxyScrape
	// status holds each proxy's last scrape outcome, by node id.
	status map[string]ScrapeStatus
	// rounds counts the scrapes of all proxies done so far.
	rounds int
}

// NewScraper returns a Scraper; call Run to scrape.
func NewScraper(opts Options) (*Scraper, error) {
	if opts.Proxies == nil {
		return nil, errors.New("meshview: Options.Proxies is required")
	}
	opts.defaults()
	return &Scraper{opts: opts, wake: make(chan struct{}, 1), history: map[string][]ProxyScrape{}, status: map[string]ScrapeStatus{}}, nil
}

// Viewed records that the page was served, starting the scrapes when they
// were idle.
func (s *Scraper) Viewed() {
	s.mu.Lock()
	s.lastView = time.Now()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scraper) active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.lastView.IsZero() && time.Since(s.lastView) < s.opts.IdleAfter
}

// Run scrapes every Interval while the page has been viewed within
// IdleAfter, until ctx is done.
func (s *Scraper) Run(ctx context.Context) error {
	for {
		if !s.active() {
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
				continue
			}
		}
		s.scrapeAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.opts.Interval):
		}
	}
}

// target is one proxy to scrape.
type target struct{ proxyID, url string }

// targets lists the connected proxies once each (a proxy's agent also
// holds a name-table stream with the same node id).
func (s *Scraper) targets() []target {
	seen := map[string]bool{}
	var out []target
	for _, c := range s.opts.Proxies.Connections() {
		if c.IP == "" || seen[c.ProxyID] {
			continue
		}
		seen[c.ProxyID] = true
		out = append(out, target{proxyID: c.ProxyID, url: "http://" + net.JoinHostPort(c.IP, strconv.Itoa(s.opts.Port)) + "/stats/prometheus"})
	}
	return out
}

// scrapeAll scrapes every target, at most Concurrency at a time, and
// records the results; proxies no longer connected are forgotten.
func (s *Scraper) scrapeAll(ctx context.Context) {
	targets := s.targets()
	type result struct {
		t     target
		at    time.Time
		edges map[reportedEdge]*Counters
		err   error
	}
	results := make([]result, len(targets))
	sem := make(chan struct{}, s.opts.Concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			edges, at, err := s.scrape(ctx, t.url)
			results[i] = result{t: t, at: at, edges: edges, err: err}
		}()
	}
	wg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	connected := map[string]bool{}
	for _, r := range results {
		connected[r.t.proxyID] = true
		st := ScrapeStatus{ProxyID: r.t.proxyID, URL: r.t.url, At: r.at}
		if r.err != nil {
			st.Err = r.err.Error()
			s.opts.Logger.Debug("mesh page scrape failed", "proxy", r.t.proxyID, "error", r.err)
		} else {
			list := append(s.history[r.t.proxyID], ProxyScrape{At: r.at, Edges: r.edges})
			for len(list) > 1 && r.at.Sub(list[0].At) > s.opts.Window {
				list = list[1:]
			}
			s.history[r.t.proxyID] = list
		}
		s.status[r.t.proxyID] = st
	}
	for id := range s.history {
		if !connected[id] {
			delete(s.history, id)
		}
	}
	for id := range s.status {
		if !connected[id] {
			delete(s.status, id)
		}
	}
	s.rounds++
}

// scrape reads one proxy's metrics; at is the time the answer arrived.
func (s *Scraper) scrape(ctx context.Context, url string) (map[reportedEdge]*Counters, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, time.Now(), err
	}
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return nil, time.Now(), fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	at := time.Now()
	if resp.StatusCode != http.StatusOK {
		return nil, at, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	samples, err := ParseText(io.LimitReader(resp.Body, s.opts.MaxBytes), wantedMetric)
	if err != nil {
		return nil, at, fmt.Errorf("scrape %s: %w", url, err)
	}
	return countersFromSamples(samples), at, nil
}

// Graph computes the graph from the scrapes of the window.
func (s *Scraper) Graph() Graph {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Build(s.history)
}

// Statuses returns each proxy's last scrape, by node id, and how many
// scrape rounds have run.
func (s *Scraper) Statuses() (map[string]ScrapeStatus, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]ScrapeStatus, len(s.status))
	for k, v := range s.status {
		out[k] = v
	}
	return out, s.rounds
}
