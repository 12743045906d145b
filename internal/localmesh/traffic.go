package localmesh

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// EchoReply is what strait-echo answers.
type EchoReply struct {
	Version string `json:"version"`
	Pod     string `json:"pod"`
	Remote  string `json:"remote"`
}

// Split is the outcome of a series of requests: how many reached each
// version, and how many failed.
type Split struct {
	Total    int
	Counts   map[string]int
	Failures int
	// FirstError is the first failure, for messages.
	FirstError string
	// Remotes counts the client addresses (IP only) the apps reported.
	Remotes map[string]int
}

// Percent is the share of requests that reached version v, in percent.
func (s Split) Percent(v string) float64 {
	if s.Total == 0 {
		return 0
	}
	return 100 * float64(s.Counts[v]) / float64(s.Total)
}

// Versions lists the versions seen, sorted.
func (s Split) Versions() []string {
	var vs []string
	for v := range s.Counts {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	return vs
}

// SendRequests makes n GET requests to url from inside the pod and tallies
// which version of strait-echo answered each one.
func (p *Pod) SendRequests(ctx context.Context, url string, n int) Split {
	return p.SendRequestsWithHeader(ctx, url, nil, n)
}

// SendRequestsWithHeader is SendRequests with extra request headers.
func (p *Pod) SendRequestsWithHeader(ctx context.Context, url string, header http.Header, n int) Split {
	client := p.HTTPClient()
	defer client.CloseIdleConnections()
	s := Split{Counts: map[string]int{}, Remotes: map[string]int{}}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		rep, err := get(ctx, client, url, header)
		s.Total++
		if err != nil {
			s.Failures++
			if s.FirstError == "" {
				s.FirstError = err.Error()
			}
			continue
		}
		s.Counts[rep.Version]++
		host, _, _ := net.SplitHostPort(rep.Remote)
		s.Remotes[host]++
	}
	return s
}

func get(ctx context.Context, client *http.Client, url string, header http.Header) (EchoReply, error) {
	var rep EchoReply
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return rep, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rep, err
	}
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		return rep, fmt.Errorf("GET %s: reply is not strait-echo's JSON: %w", url, err)
	}
	return rep, nil
}

// Load sends requests in a loop from a pod until stopped, on keep-alive
// connections, counting successes and failures.
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards split
	split  Split
}

// StartLoad starts sending requests to url from the pod with the given
// number of concurrent clients.
func (p *Pod) StartLoad(ctx context.Context, url string, clients int) *Load {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel, split: Split{Counts: map[string]int{}, Remotes: map[string]int{}}}
	for range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			client := p.HTTPClient()
			defer client.CloseIdleConnections()
			for ctx.Err() == nil {
				rep, err := get(ctx, client, url, nil)
				if ctx.Err() != nil {
					return // cancelled mid-request: not a failure of the mesh
				}
				l.mu.Lock()
				l.split.Total++
				if err != nil {
					l.split.Failures++
					if l.split.FirstError == "" {
						l.split.FirstError = err.Error()
					}
				} else {
					l.split.Counts[rep.Version]++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// Seen returns what the load has seen so far, while it goes on: a test
// waits on it for the load to be under way instead of sleeping.
func (l *Load) Seen() Split {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.split
	s.Counts = maps.Clone(l.split.Counts)
	s.Remotes = maps.Clone(l.split.Remotes)
	return s
}

// Stop ends the load and returns what it saw.
func (l *Load) Stop() Split {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.split
}

// Admin fetches a path from the pod's proxy admin (127.0.0.1:15000).
func (p *Pod) Admin(ctx context.Context, path string) ([]byte, error) {
	client := p.HTTPClient()
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:15000"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("proxy admin %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("proxy admin %s: %d", path, resp.StatusCode)
	}
	return body, nil
}

// RouteWeights reads the proxy's config dump and returns the weight of every
// weighted cluster in its routes, by cluster name.
func (p *Pod) RouteWeights(ctx context.Context) (map[string]uint32, error) {
	body, err := p.Admin(ctx, "/config_dump")
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("config_dump is not JSON: %w", err)
	}
	weights := map[string]uint32{}
	collectWeights(doc, weights)
	return weights, nil
}

// collectWeights walks a JSON document for route weighted_clusters entries
// ({"name": "outbound|…", "weight": N}).
func collectWeights(v any, out map[string]uint32) {
	switch t := v.(type) {
	case map[string]any:
		if name, ok := t["name"].(string); ok && strings.HasPrefix(name, "outbound|") {
			if w, ok := t["weight"].(float64); ok {
				out[name] = uint32(w)
			}
		}
		for _, c := range t {
			collectWeights(c, out)
		}
	case []any:
		for _, c := range t {
			collectWeights(c, out)
		}
	}
}

// ClusterRequests reads envoy_cluster_upstream_rq_total for a cluster from
// the proxy's /stats/prometheus.
func (p *Pod) ClusterRequests(ctx context.Context, cluster string) (int, error) {
	body, err := p.Admin(ctx, "/stats/prometheus")
	if err != nil {
		return 0, err
	}
	want := `envoy_cluster_upstream_rq_total{cluster_name="` + cluster + `"}`
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, want); ok {
			var n float64
			if _, err := fmt.Sscan(strings.TrimSpace(rest), &n); err != nil {
				return 0, fmt.Errorf("stats line %q: %w", line, err)
			}
			return int(n), nil
		}
	}
	return 0, nil
}
