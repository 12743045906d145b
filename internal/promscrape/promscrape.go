// Package promscrape holds Istio's Prometheus scrape configuration of an
// app (PrometheusScrapeConfiguration in pilot/cmd/pilot-agent/status): what
// the injector reads from the pod's prometheus.io/* and
// prometheus.istio.io/scrape-targets annotations and hands the agent as
// JSON in ISTIO_PROMETHEUS_ANNOTATIONS, so the agent can merge the app's
// metrics into its own /stats/prometheus after the annotations are
// rewritten to point at it.
package promscrape

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// EnvVar carries the configuration, as JSON, from the injector to the agent.
const EnvVar = "ISTIO_PROMETHEUS_ANNOTATIONS"

// The pod annotations read (pkg/kube/inject/webhook.go compares them after
// strutil.SanitizeLabelName, so prometheus_io_port counts too).
const (
	AnnotationScrape  = "prometheus.io/scrape"
	AnnotationPort    = "prometheus.io/port"
	AnnotationPath    = "prometheus.io/path"
	AnnotationTargets = "prometheus.istio.io/scrape-targets"
)

// DefaultPath and DefaultPort are what the agent scrapes when the pod
// named no path or port.
const (
	DefaultPath = "/metrics"
	DefaultPort = "80"
)

// Target is one metrics endpoint of the app, on localhost.
type Target struct {
	Port string `json:"port"`
	Path string `json:"path"`
}

// Config is Istio's PrometheusScrapeConfiguration, field for field.
type Config struct {
	Scrape  string   `json:"scrape"`
	Path    string   `json:"path"`
	Port    string   `json:"port"`
	Targets []Target `json:"targets,omitempty"`
}

// IsEmpty says the pod named nothing to scrape: the injector then sets no
// EnvVar and the agent merges only the proxy's and its own metrics.
func (c Config) IsEmpty() bool {
	return c.Scrape == "" && c.Path == "" && c.Port == "" && len(c.Targets) == 0
}

// reservedPorts are the data-plane ports Istio refuses as scrape targets
// (pilot-agent's istioReservedPorts): the merged endpoint itself, the
// proxy's own stats (already merged) and ports that are not the app's.
var reservedPorts = map[int]string{
	15000: "Envoy admin",
	15001: "outbound traffic capture",
	15004: "pilot debug",
	15006: "inbound traffic capture",
	15008: "HBONE tunnel",
	15020: "pilot-agent status / merged Prometheus",
	15021: "Envoy health",
	15053: "DNS proxy",
	15090: "Envoy Prometheus (already merged)",
}

// sanitize is Istio's strutil.SanitizeLabelName: every character but
// [a-zA-Z0-9_] becomes '_'.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// IsScrapeAnnotation says whether annotation key is one of the four above,
// in any spelling Istio accepts.
func IsScrapeAnnotation(key string) bool {
	switch sanitize(key) {
	case sanitize(AnnotationScrape), sanitize(AnnotationPort), sanitize(AnnotationPath), sanitize(AnnotationTargets):
		return true
	}
	return false
}

// FromAnnotations reads the pod's scrape annotations (getPrometheusScrapeConfiguration).
func FromAnnotations(a map[string]string) (Config, error) {
	var c Config
	for k, v := range a {
		switch sanitize(k) {
		case sanitize(AnnotationPort):
			c.Port = v
		case sanitize(AnnotationScrape):
			c.Scrape = v
		case sanitize(AnnotationPath):
			c.Path = v
		case sanitize(AnnotationTargets):
			t, err := ParseTargets(v)
			if err != nil {
				return Config{}, fmt.Errorf("annotation %s: %w", k, err)
			}
			c.Targets = t
		}
	}
	return c, nil
}

// ParseTargets reads prometheus.istio.io/scrape-targets: comma-separated
// "port:path" pairs, the path defaulting to /metrics (ParseScrapeTargets).
func ParseTargets(raw string) ([]Target, error) {
	var out []Target
	for _, entry := range strings.Split(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		port, path, _ := strings.Cut(entry, ":")
		port, path = strings.TrimSpace(port), strings.TrimSpace(path)
		if port == "" {
			return nil, fmt.Errorf("scrape target %q has no port (want PORT[:PATH], e.g. 9090:/metrics)", entry)
		}
		if path == "" {
			path = DefaultPath
		}
		out = append(out, Target{Port: port, Path: path})
	}
	return out, nil
}

// checkPort refuses what pilot-agent and the injector refuse: a port that
// is not 1-65535, the agent's own status port, or one of Istio's.
func checkPort(port string, statusPort int) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("invalid port %q (want 1-65535)", port)
	}
	if n == statusPort {
		return fmt.Errorf("port %s is the agent's status port, where the merged metrics are served: scraping it would loop", port)
	}
	if reason, ok := reservedPorts[n]; ok {
		return fmt.Errorf("port %s is reserved for Istio (%s) and cannot be scraped", port, reason)
	}
	return nil
}

// ForInjection checks c as the injector does (applyPrometheusMerge) and
// fills Port and Path from the first target for agents that read only
// those.
func (c Config) ForInjection(statusPort int) (Config, error) {
	if len(c.Targets) > 0 {
		c.Port, c.Path = c.Targets[0].Port, c.Targets[0].Path
		for _, t := range c.Targets {
			if err := checkPort(t.Port, statusPort); err != nil {
				return Config{}, fmt.Errorf("invalid prometheus scrape targets: %w", err)
			}
		}
	} else if c.Port != "" {
		if err := checkPort(c.Port, statusPort); err != nil {
			return Config{}, fmt.Errorf("invalid prometheus scrape configuration: %w", err)
		}
	}
	return c, nil
}

// AgentTargets decodes the agent's EnvVar value and returns the endpoints
// to scrape, as pilot-agent's NewServer reads it: none when scrape is
// "false"; else the targets, or one made of port (default 80) and path
// (default /metrics). Every port is checked as the injector checks it.
func AgentTargets(value string, statusPort int) ([]Target, error) {
	var c Config
	if err := json.Unmarshal([]byte(value), &c); err != nil {
		return nil, fmt.Errorf("%s: %q is not a scrape configuration (JSON with scrape, port, path, targets): %w", EnvVar, value, err)
	}
	if c.Scrape == "false" {
		return nil, nil
	}
	targets := c.Targets
	if len(targets) == 0 {
		t := Target{Port: c.Port, Path: c.Path}
		if t.Port == "" {
			t.Port = DefaultPort
		}
		targets = []Target{t}
	}
	out := make([]Target, len(targets))
	for i, t := range targets {
		if t.Path == "" {
			t.Path = DefaultPath
		}
		if err := checkPort(t.Port, statusPort); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvVar, err)
		}
		out[i] = t
	}
	return out, nil
}

// IsPortAnnotation says whether key is prometheus.io/port in a spelling
// Istio accepts.
func IsPortAnnotation(key string) bool { return sanitize(key) == sanitize(AnnotationPort) }

// IsScrapeFlagAnnotation says whether key is prometheus.io/scrape in a
// spelling Istio accepts.
func IsScrapeFlagAnnotation(key string) bool { return sanitize(key) == sanitize(AnnotationScrape) }
