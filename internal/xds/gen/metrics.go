package gen

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// buildsDesc describes strait_generator_builds_total: resources the
// generator built, by type. With the per-scope cache, it grows with config
// changes, not with connected proxies; a steady climb under a steady mesh
// means the cache is missing.
var buildsDesc = prometheus.NewDesc("strait_generator_builds_total",
	"Resources the xDS generator built (cache misses), by type (cluster, eds, listener, route).",
	[]string{"type"}, nil)

// Collector exposes the generator's build counts for a Prometheus registry.
func (g *Generator) Collector() prometheus.Collector { return buildsCollector{g} }

type buildsCollector struct{ g *Generator }

func (c buildsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- buildsDesc }

func (c buildsCollector) Collect(ch chan<- prometheus.Metric) {
	builds := c.g.Builds()
	types := make([]string, 0, len(builds))
	for t := range builds {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		ch <- prometheus.MustNewConstMetric(buildsDesc, prometheus.CounterValue, float64(builds[t]), t)
	}
}

var _ prometheus.Collector = buildsCollector{}
