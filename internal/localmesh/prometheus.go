package localmesh

// A real Prometheus (Debian's prometheus binary) scraping a local mesh:
// every pod's agent on 15020 /stats/prometheus (the proxy's istio_* and
// envoy_* metrics, the agent's and the app's) and straitd's /metrics. It
// runs with its own config and storage in a temporary directory and
// listens on loopback only; Close stops it and removes the directory.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ScrapeTarget is one endpoint Prometheus scrapes.
type ScrapeTarget struct {
	// Job is the job_name; targets of one job share a metrics path.
	Job string
	// Addr is host:port, Path the metrics path.
	Addr, Path string
	// Labels are added to every series of the target (pod, namespace).
	Labels map[string]string
}

// PrometheusOptions configure StartPrometheus.
type PrometheusOptions struct {
	// Binary is the prometheus executable (default: "prometheus" on PATH,
	// else /usr/bin/prometheus).
	Binary string
	// Targets are scraped every ScrapeInterval (default 5s).
	Targets        []ScrapeTarget
	ScrapeInterval time.Duration
	// Addr is the listen address (default 127.0.0.1 on a free port).
	Addr string
	// KubernetesPods adds Istio's "kubernetes-pods" job: pods annotated
	// prometheus.io/scrape "true" are scraped on their prometheus.io/port
	// and prometheus.io/path (which injection points at the agent's merged
	// metrics on 15020). Debian's Prometheus is built without Kubernetes
	// discovery, so the pods come from SetPods (a file_sd file carrying
	// the labels Kubernetes discovery would give them) and Istio's
	// relabelling is applied to them unchanged.
	KubernetesPods bool
}

// PodMeta is what Kubernetes discovery knows of a pod.
type PodMeta struct {
	Namespace, Name, IP, Phase string
	Labels, Annotations        map[string]string
}

// podsFile is the file_sd file of the kubernetes-pods job, in the
// Prometheus's directory.
const podsFile = "pods.json"

// kubernetesPodsJob is Istio's "kubernetes-pods" scrape job
// (samples/addons/prometheus.yaml), its kubernetes_sd_configs replaced by
// the file SetPods writes. %s is the JSON-quoted file path.
const kubernetesPodsJob = `- job_name: "kubernetes-pods"
  file_sd_configs:
  - files: [%s]
  relabel_configs:
  - action: keep
    regex: true
    source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
  - action: drop
    regex: true
    source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape_slow]
  - action: replace
    regex: (https?)
    source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scheme]
    target_label: __scheme__
  - action: replace
    regex: (.+)
    source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
    target_label: __metrics_path__
  - action: replace
    regex: (\d+);((([0-9]+?)(\.|$)){4})
    replacement: $2:$1
    source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_port, __meta_kubernetes_pod_ip]
    target_label: __address__
  - action: labelmap
    regex: __meta_kubernetes_pod_label_(.+)
  - action: replace
    source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - action: replace
    source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
  - action: drop
    regex: Pending|Succeeded|Failed|Completed
    source_labels: [__meta_kubernetes_pod_phase]
`

// podTargets is the file_sd content for pods: one target group per pod
// (its address is replaced by the relabelling), labelled as Kubernetes
// discovery labels a pod, names sanitised to [a-zA-Z0-9_] as it does.
func podTargets(pods []PodMeta) ([]byte, error) {
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	sanitize := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
				return r
			}
			return '_'
		}, s)
	}
	groups := []group{}
	for _, p := range pods {
		l := map[string]string{
			"__meta_kubernetes_namespace": p.Namespace,
			"__meta_kubernetes_pod_name":  p.Name,
			"__meta_kubernetes_pod_ip":    p.IP,
			"__meta_kubernetes_pod_phase": p.Phase,
		}
		for k, v := range p.Labels {
			l["__meta_kubernetes_pod_label_"+sanitize(k)] = v
		}
		for k, v := range p.Annotations {
			l["__meta_kubernetes_pod_annotation_"+sanitize(k)] = v
		}
		groups = append(groups, group{Targets: []string{p.IP}, Labels: l})
	}
	return json.Marshal(groups)
}

// SetPods replaces the pods the kubernetes-pods job discovers (Prometheus
// watches the file and rereads it at once).
func (p *Prometheus) SetPods(pods []PodMeta) error {
	data, err := podTargets(pods)
	if err != nil {
		return err
	}
	tmp := filepath.Join(p.dir, podsFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(p.dir, podsFile))
}

// Prometheus is a running Prometheus.
type Prometheus struct {
	// URL is its HTTP API's base, e.g. http://127.0.0.1:41234.
	URL  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

// MeshTargets are the scrape targets of a mesh: each pod's agent and straitd.
func (m *Mesh) MeshTargets() []ScrapeTarget {
	var out []ScrapeTarget
	for _, name := range slices.Sorted(maps.Keys(m.pods)) {
		p := m.pods[name]
		out = append(out, ScrapeTarget{Job: "sidecars", Addr: net.JoinHostPort(p.IP, strconv.Itoa(StatusPort)), Path: "/stats/prometheus",
			Labels: map[string]string{"pod": p.Name, "namespace": p.Namespace}})
	}
	if m.monAddr != "" {
		out = append(out, ScrapeTarget{Job: "straitd", Addr: m.monAddr, Path: "/metrics"})
	}
	return out
}

// prometheusConfig renders prometheus.yml: the static targets and, when
// podsFile is set, the kubernetes-pods job reading it. Every string is
// JSON-quoted, which YAML reads as a double-quoted scalar.
func prometheusConfig(targets []ScrapeTarget, podsFile string, interval time.Duration) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n", interval, interval)
	var jobs []string
	paths := map[string]string{}
	byJob := map[string][]ScrapeTarget{}
	for _, t := range targets {
		if _, ok := byJob[t.Job]; !ok {
			jobs = append(jobs, t.Job)
			paths[t.Job] = t.Path
		}
		byJob[t.Job] = append(byJob[t.Job], t)
	}
	for _, j := range jobs {
		fmt.Fprintf(&b, "- job_name: %s\n  metrics_path: %s\n  static_configs:\n", q(j), q(paths[j]))
		for _, t := range byJob[j] {
			fmt.Fprintf(&b, "  - targets: [%s]\n", q(t.Addr))
			if len(t.Labels) > 0 {
				b.WriteString("    labels:\n")
				for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
					fmt.Fprintf(&b, "      %s: %s\n", q(k), q(t.Labels[k]))
				}
			}
		}
	}
	if podsFile != "" {
		fmt.Fprintf(&b, kubernetesPodsJob, q(podsFile))
	}
	return b.String()
}

// StartPrometheus starts Prometheus and returns once it is ready.
func StartPrometheus(ctx context.Context, opts PrometheusOptions) (*Prometheus, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("prometheus"); err != nil {
			bin = "/usr/bin/prometheus"
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("prometheus binary: %w (install Debian's prometheus package: apt-get install -y prometheus)", err)
	}
	interval := opts.ScrapeInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	addr := opts.Addr
	if addr == "" {
		port, err := freePort("127.0.0.1")
		if err != nil {
			return nil, err
		}
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	dir, err := os.MkdirTemp("", "strait-prometheus-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	pods := ""
	if opts.KubernetesPods {
		pods = filepath.Join(dir, podsFile)
		if err := os.WriteFile(pods, []byte("[]"), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := os.WriteFile(cfg, []byte(prometheusConfig(opts.Targets, pods, interval)), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// It dies with its parent, even one that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	logFile.Close()
	p := &Prometheus{URL: "http://" + addr, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
		_ = p.Close()
		return nil, fmt.Errorf("prometheus not ready: %w\n%s", err, tailLines(string(log), 20))
	}
	return p, nil
}

func (p *Prometheus) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			if p.err == nil {
				return errors.New("prometheus exited")
			}
			return fmt.Errorf("prometheus exited: %w", p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close stops Prometheus and removes its directory.
func (p *Prometheus) Close() error {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return os.RemoveAll(p.dir)
}

// Point is one sample.
type Point struct {
	T time.Time
	V float64
}

// Series is one result of a query: an instant vector's element has one
// point, a range vector's has them all; a scalar has no labels.
type Series struct {
	Metric map[string]string
	Points []Point
}

// Query evaluates expr at time at (zero: now) through the HTTP API
// (/api/v1/query).
func (p *Prometheus) Query(ctx context.Context, expr string, at time.Time) ([]Series, error) {
	v := url.Values{"query": {expr}}
	if !at.IsZero() {
		v.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	switch r.Data.ResultType {
	case "scalar":
		var pt [2]any
		if err := json.Unmarshal(r.Data.Result, &pt); err != nil {
			return nil, err
		}
		p, err := point(pt)
		return []Series{{Points: []Point{p}}}, err
	case "vector", "matrix":
		var rs []struct {
			Metric map[string]string `json:"metric"`
			Value  *[2]any           `json:"value"`
			Values [][2]any          `json:"values"`
		}
		if err := json.Unmarshal(r.Data.Result, &rs); err != nil {
			return nil, err
		}
		out := make([]Series, len(rs))
		for i, s := range rs {
			out[i].Metric = s.Metric
			if s.Value != nil {
				s.Values = append(s.Values, *s.Value)
			}
			for _, pt := range s.Values {
				p, err := point(pt)
				if err != nil {
					return nil, err
				}
				out[i].Points = append(out[i].Points, p)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("query %q: result type %q", expr, r.Data.ResultType)
}

func point(pt [2]any) (Point, error) {
	ts, ok1 := pt[0].(float64)
	vs, ok2 := pt[1].(string)
	if !ok1 || !ok2 {
		return Point{}, errors.New("malformed sample")
	}
	v, err := strconv.ParseFloat(vs, 64)
	return Point{T: time.UnixMilli(int64(ts*1000 + 0.5)), V: v}, err
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
