package main

import (
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
