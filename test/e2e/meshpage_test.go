package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/meshview"
	"github.com/straitmesh/strait/internal/testreq"
)

// TestMeshPage: straitd's mesh page over a real local mesh, read by a real
// browser. After a first scrape of both sidecars, the client sends 40
// requests that the server answers 200 and 10 it answers 500; straitd
// scrapes the server sidecar's istio_* metrics again and the page, loaded
// by headless Chromium, shows the edge client → echo-v1 with 50 requests,
// 80.0% success and 50 requests over its window as the rate (DOM), drawn
// in the failing colour between the two workloads' positions of the
// deterministic layout (screenshot), and both proxies' xDS types SYNCED.
func TestMeshPage(t *testing.T) {
	requireMesh(t)
	chromium := testreq.Binary(t, "chromium", "chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "telemetry", localmesh.Options{
		SecureXDS:   true,
		StraitdArgs: []string{"--mesh-scrape-interval=1s", "--mesh-window=3m"},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
			echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
		},
	})
	client := m.Pod("client")
	c := client.NewHTTPClient(false)
	waitOK(ctx, t, c, localmesh.DemoURL)
	pageURL := "http://" + m.MonitoringAddr() + meshview.Path

	// The first view starts the scrapes; the traffic comes once both
	// sidecars have a scrape to compare with.
	rounds := regexp.MustCompile(`(\d+) scrape rounds`)
	waitFor(ctx, t, 30*time.Second, "a first scrape of both sidecars", func() error {
		page, err := getPage(ctx, pageURL)
		if err != nil {
			return err
		}
		mm := rounds.FindSubmatch(page)
		if mm == nil {
			return fmt.Errorf("no scrape count on the page")
		}
		if n, _ := strconv.Atoi(string(mm[1])); n < 1 {
			return fmt.Errorf("%d scrape rounds", n)
		}
		if bytes.Contains(page, []byte(`class="err"`)) || bytes.Count(page, []byte(`ago</td></tr>`)) != 2 {
			return fmt.Errorf("the proxies are not both scraped:\n%s", proxyTable(page))
		}
		return nil
	})
	for i := range 50 {
		h := http.Header{}
		if i%5 == 4 {
			h.Set("X-Echo-Status", "500")
		}
		r := send(ctx, c, "GET", localmesh.DemoURL, "", h)
		want := 200
		if i%5 == 4 {
			want = 500
		}
		if r.err != nil || r.status != want {
			t.Fatalf("request %d: %v, want status %d", i, r, want)
		}
	}

	edge := regexp.MustCompile(`(?s)<tr class="edge" data-source="demo/client" data-destination="demo/echo-v1">(.*?)</tr>`)
	cell := func(row []byte, class string) string {
		mm := regexp.MustCompile(`<td class="n ` + class + `"[^>]*>([^<]*)</td>`).FindSubmatch(row)
		if mm == nil {
			return ""
		}
		return string(mm[1])
	}
	waitFor(ctx, t, 30*time.Second, "the page to count the 50 requests", func() error {
		page, err := getPage(ctx, pageURL)
		if err != nil {
			return err
		}
		mm := edge.FindSubmatch(page)
		if mm == nil || cell(mm[1], "requests") != "50" {
			return fmt.Errorf("no edge demo/client → demo/echo-v1 with 50 requests:\n%s", edgeTable(page))
		}
		return nil
	})

	// What the browser shows: the DOM after load.
	dir := t.TempDir()
	dom := runChromium(ctx, t, chromium, dir, "--dump-dom", pageURL)
	mm := edge.FindSubmatch(dom)
	if mm == nil {
		t.Fatalf("the browser's DOM has no edge demo/client → demo/echo-v1:\n%s", edgeTable(dom))
	}
	row := mm[1]
	t.Logf("edge: requests %s, 5xx %s, over %s, rate %s, success %s, p99 %s",
		cell(row, "requests"), cell(row, "errors"), cell(row, "window"), cell(row, "rate"), cell(row, "success"), cell(row, "p99"))
	if got := cell(row, "requests"); got != "50" {
		t.Errorf("requests %q, want 50", got)
	}
	if got := cell(row, "errors"); got != "10" {
		t.Errorf("5xx %q, want 10", got)
	}
	if got := cell(row, "success"); got != "80.0%" {
		t.Errorf("success %q, want 80.0%%", got)
	}
	var window, rate float64
	if _, err := fmt.Sscanf(cell(row, "window"), "%fs", &window); err != nil || window <= 0 {
		t.Fatalf("window %q: %v", cell(row, "window"), err)
	}
	if _, err := fmt.Sscanf(cell(row, "rate"), "%f rps", &rate); err != nil {
		t.Fatalf("rate %q: %v", cell(row, "rate"), err)
	}
	// The rate is the 50 requests over the window (both printed rounded).
	if d := rate*window - 50; d < -0.5 || d > 0.5 {
		t.Errorf("rate %.2f rps over %.2fs is %.1f requests, want 50", rate, window, rate*window)
	}
	if p := cell(row, "p99"); p == "-" || p == "" {
		t.Errorf("p99 %q, want a latency", p)
	}
	for _, pod := range []string{"client", "echo-v1"} {
		pr := regexp.MustCompile(`(?s)<tr class="proxy" data-proxy="sidecar~[^~]+~` + regexp.QuoteMeta(pod) + `\.demo~[^"]*">(.*?)</tr>`).FindSubmatch(dom)
		if pr == nil {
			t.Errorf("no proxy row for %s:\n%s", pod, proxyTable(dom))
			continue
		}
		if n := bytes.Count(pr[1], []byte(`<td class="SYNCED"`)); n != 4 {
			t.Errorf("%s: %d xDS types SYNCED, want CDS, LDS, RDS and EDS:\n%s", pod, n, pr[1])
		}
	}

	// What the browser draws: the edge's colour along the line between
	// the two workloads, which the layout places deterministically (the
	// graph's nodes sorted: demo/client first, on the left).
	shot := filepath.Join(dir, "mesh.png")
	runChromium(ctx, t, chromium, dir, "--screenshot="+shot, "--window-size=1000,800", pageURL)
	img := decodePNG(t, shot)
	pos := meshview.Layout(2)
	from, to := pos[0], pos[1]
	red := hexColour(t, meshview.ColourFailing)
	onLine, samples := 0, 0
	for i := 1; i < 20; i++ {
		f := float64(i) / 20
		x, y := from.X+(to.X-from.X)*f, from.Y+(to.Y-from.Y)*f
		if dist := (to.X - from.X) * f; dist < meshview.NodeRadius+8 || (to.X-from.X)-dist < meshview.NodeRadius+12 {
			continue // inside a node or under the arrow head
		}
		samples++
		if near(img.At(int(x), int(y)), red) {
			onLine++
		}
	}
	if samples == 0 || onLine < samples*9/10 {
		t.Errorf("the edge's colour %s at %d of %d points between %v and %v, want nearly all (%s)", meshview.ColourFailing, onLine, samples, from, to, shot)
	}
	// And nowhere else: well below the line the canvas is blank.
	if near(img.At(int((from.X+to.X)/2), int(from.Y)+120), red) {
		t.Errorf("the edge's colour away from the edge: the screenshot is not the graph")
	}
	if t.Failed() {
		// The temp dir goes with the test: keep the screenshot to look at.
		if data, err := os.ReadFile(shot); err == nil {
			kept := filepath.Join(os.TempDir(), fmt.Sprintf("strait-meshpage-%d.png", os.Getpid()))
			if err := os.WriteFile(kept, data, 0o644); err == nil {
				t.Logf("screenshot kept in %s", kept)
			}
		}
	}
}

// getPage fetches the page as an operator's tool would, from loopback.
func getPage(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// runChromium runs headless Chromium on url with the given flags and
// returns its standard output.
func runChromium(ctx context.Context, t *testing.T, chromium, dir string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile")}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, tail(stderr.String(), 20))
	}
	return stdout.Bytes()
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	return img
}

type rgb struct{ r, g, b int }

func hexColour(t *testing.T, s string) rgb {
	t.Helper()
	var c rgb
	if _, err := fmt.Sscanf(s, "#%02x%02x%02x", &c.r, &c.g, &c.b); err != nil {
		t.Fatalf("colour %q: %v", s, err)
	}
	return c
}

// near reports whether a pixel is the colour c, give or take
// anti-aliasing and colour management.
func near(p interface{ RGBA() (r, g, b, a uint32) }, c rgb) bool {
	r, g, b, _ := p.RGBA()
	d := func(v uint32, w int) int {
		x := int(v>>8) - w
		if x < 0 {
			return -x
		}
		return x
	}
	return d(r, c.r) < 24 && d(g, c.g) < 24 && d(b, c.b) < 24
}

func edgeTable(page []byte) string {
	return string(regexp.MustCompile(`(?s)<table id="edges">.*?</table>`).Find(page))
}

func proxyTable(page []byte) string {
	return string(regexp.MustCompile(`(?s)<table id="proxies">.*?</table>`).Find(page))
}
