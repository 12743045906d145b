package meshview

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkBuildAndRender: the page's work per view for a mesh of 1,000
// proxies of 100 workloads, each proxy reporting 5 edges (5 response
// codes, 20 buckets each) in two scrapes: Build and the SVG.
func BenchmarkBuildAndRender(b *testing.B) {
	scrapes := map[string][]ProxyScrape{}
	for p := range 1000 {
		var text [2]strings.Builder
		for e := range 5 {
			src, dst := fmt.Sprintf("w%d", p%100), fmt.Sprintf("w%d", (p+e+1)%100)
			for i := range 2 {
				for _, code := range []string{"200", "201", "404", "500", "503"} {
					text[i].WriteString(reqs("destination", src, dst, code, float64(100*(i+1))))
				}
				for le := range 19 {
					fmt.Fprintf(&text[i], `istio_request_duration_milliseconds_bucket{reporter="destination",source_workload=%q,source_workload_namespace="demo",destination_workload=%q,destination_workload_namespace="demo",le="%d"} %d`+"\n", src, dst, 1<<le, (i+1)*le)
				}
				fmt.Fprintf(&text[i], `istio_request_duration_milliseconds_bucket{reporter="destination",source_workload=%q,source_workload_namespace="demo",destination_workload=%q,destination_workload_namespace="demo",le="+Inf"} %d`+"\n", src, dst, (i+1)*20)
			}
		}
		for i := range 2 {
			samples, err := ParseText(strings.NewReader(text[i].String()), wantedMetric)
			if err != nil {
				b.Fatal(err)
			}
			scrapes[fmt.Sprint(p)] = append(scrapes[fmt.Sprint(p)], ProxyScrape{At: t0.Add(time.Duration(i) * time.Minute), Edges: countersFromSamples(samples)})
		}
	}
	b.ResetTimer()
	for b.Loop() {
		g := Build(scrapes)
		if len(g.Edges) != 500 {
			b.Fatalf("%d edges", len(g.Edges))
		}
		if _, err := RenderSVG(g, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseScrape: one proxy's scrape with 500 istio_* lines among
// 5,000 lines of other stats.
func BenchmarkParseScrape(b *testing.B) {
	var text strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&text, "envoy_cluster_upstream_rq_total{envoy_cluster_name=\"outbound|80||svc-%d.demo.svc.cluster.local\"} %d\n", i, i)
	}
	for i := range 500 {
		text.WriteString(reqs("destination", "client", fmt.Sprintf("w%d", i%50), fmt.Sprint(200+i%5), float64(i)))
	}
	in := text.String()
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for b.Loop() {
		samples, err := ParseText(strings.NewReader(in), wantedMetric)
		if err != nil || len(samples) != 500 {
			b.Fatal(len(samples), err)
		}
		_ = countersFromSamples(samples)
	}
}
