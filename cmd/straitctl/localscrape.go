package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/straitmesh/strait/internal/localmesh"
)

// printScrapeTargets says where Prometheus scrapes the local mesh: each
// pod's agent on 15020 /stats/prometheus (the proxy's istio_* and envoy_*
// metrics, the agent's, and the app's when its WorkloadEntry declares
// prometheus.io/port), as the injector's prometheus.io annotations point
// Prometheus in Kubernetes, and straitd's monitoring port.
func printScrapeTargets(out io.Writer, st *localState) {
	fmt.Fprintln(out, "\nPrometheus scrape targets (reachable from this host):")
	for _, p := range st.Pods {
		fmt.Fprintf(out, "  %s: http://%s/stats/prometheus\n", p.Name, net.JoinHostPort(p.IP, strconv.Itoa(localmesh.StatusPort)))
	}
	fmt.Fprintf(out, "  straitd: http://%s/metrics\n", st.MonitoringAddr)
}

// startPrometheus starts a Prometheus scraping the mesh (--prometheus)
// and returns what stops it.
func startPrometheus(ctx context.Context, out io.Writer, m *localmesh.Mesh) (func(), error) {
	prom, err := localmesh.StartPrometheus(ctx, localmesh.PrometheusOptions{Targets: m.MeshTargets()})
	if err != nil {
		return nil, fmt.Errorf("--prometheus: %w", err)
	}
	fmt.Fprintf(out, "Prometheus scraping them every 5s: %s (API: %s/api/v1/query?query=istio_requests_total)\n", prom.URL, prom.URL)
	return func() {
		if err := prom.Close(); err != nil {
			fmt.Fprintf(out, "    warning: prometheus: %v\n", err)
		}
	}, nil
}
