package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/kubenode"
	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/testreq"
)

// checkKubePrometheus, a step of TestKubeSeedFlow: a real Prometheus
// (Debian's) scrapes the one-node cluster's injected pods as Istio's
// Prometheus does (the kubernetes-pods job, driven by the prometheus.io
// annotations that injection points at the agent's merged metrics on
// 15020), and the queries of Istio's mesh, service and workload
// dashboards give the exact figures for a known load from the client pod
// to the server (every request routed to v1 by the caller), as
// TestPrometheusDashboards checks them on a local mesh.
func checkKubePrometheus(ctx context.Context, t *testing.T, node *kubenode.Node, client kubernetes.Interface, clientPod string) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testreq.Missing(t, "no prometheus binary (make deps installs Debian's prometheus package)")
	}
	prom, err := localmesh.StartPrometheus(ctx, localmesh.PrometheusOptions{Binary: bin, KubernetesPods: true, ScrapeInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Close()
	pods, err := client.CoreV1().Pods(kubeDemoNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var metas []localmesh.PodMeta
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		if a := p.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "15020" || a["prometheus.io/path"] != "/stats/prometheus" {
			t.Errorf("pod %s: prometheus.io annotations %q %q %q, want injection's true, 15020, /stats/prometheus",
				p.Name, a["prometheus.io/scrape"], a["prometheus.io/port"], a["prometheus.io/path"])
		}
		metas = append(metas, localmesh.PodMeta{Namespace: p.Namespace, Name: p.Name, IP: p.Status.PodIP, Phase: string(p.Status.Phase),
			Labels: p.Labels, Annotations: p.Annotations})
	}
	if err := prom.SetPods(metas); err != nil {
		t.Fatal(err)
	}
	url := "http://" + serverHost + "/"
	get := func(n int, headers ...string) []echoLine {
		args := []string{"strait-echo", "get", "-n", fmt.Sprint(n)}
		for _, h := range headers {
			args = append(args, "-header", h)
		}
		out, _, err := node.Exec(ctx, kubeDemoNS, clientPod, "echo", append(args, url)...)
		if err != nil {
			t.Fatal(err)
		}
		return parseEchoLines(t, out)
	}
	// Both answers once, so that the 200 and 500 series of each reporter
	// exist before the load; the caller routes every request to v1.
	for _, want := range []int{200, 500} {
		l := get(1, fmt.Sprintf("X-Echo-Status=%d", want))
		if len(l) != 1 || l[0].Status != want || l[0].Reply == nil || l[0].Reply.Version != "v1" {
			t.Fatalf("warm-up: %+v, want %d from v1", l, want)
		}
	}
	// The series carry the kubernetes-pods job's labels.
	waitFor(ctx, t, 60*time.Second, "the client pod's series scraped by the kubernetes-pods job", func() error {
		res, err := prom.Query(ctx, `istio_requests_total{job="kubernetes-pods",namespace="`+kubeDemoNS+`",pod="`+clientPod+`",app="client",reporter="source"}`, time.Time{})
		if err != nil {
			return err
		}
		if len(res) == 0 {
			return fmt.Errorf("no series yet")
		}
		return nil
	})
	checkDashboards(ctx, t, prom, dashboardLoad{
		sourceSel: `istio_requests_total{reporter="source",source_workload="client",destination_workload="server-v1"}`,
		destSel:   `istio_requests_total{reporter="destination",source_workload="client",destination_workload="server-v1"}`,
		service:   serverHost,
		namespace: kubeDemoNS,
		workloads: "server-v1",
		send: func(delay string, n, status int) {
			var h []string
			if delay != "" {
				h = append(h, "X-Echo-Delay="+delay)
			}
			want := 200
			if status != 0 {
				want = status
				h = append(h, fmt.Sprintf("X-Echo-Status=%d", status))
			}
			for _, l := range get(n, h...) {
				if l.Status != want {
					t.Fatalf("load: %+v, want %d", l, want)
				}
			}
		},
	})
}
