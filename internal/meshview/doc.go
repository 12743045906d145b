// Package meshview is straitd's mesh page (/debug/mesh): the workload graph
// with request rate, success rate and p99 latency per edge, computed from
// the proxies' own istio_* metrics, beside each proxy's xDS sync state —
// the view a Kiali user expects, with nothing to install.
//
// The Scraper reads every connected proxy's Prometheus endpoint (the
// proxy's 15090 /stats/prometheus) while someone looks at the page, and
// keeps the scrapes of the last window; Build turns the oldest and newest
// scrape of each proxy into counter and histogram-bucket deltas (Kiali's
// rate over its duration); Render draws the graph as server-rendered SVG
// in one HTML page with no external assets.
package meshview
