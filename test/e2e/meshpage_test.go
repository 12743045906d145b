package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/meshview"
	"github.com/straitmesh/strait/internal/testreq"
)

// TestMeshPage: straitd's mesh page over a real local mesh, read by a real
// browser. After a first scrape of the three sidecars, the client sends 40
// requests that echo-v1 answers 200 and 10 it answers 500, and 5
// connections to raw's TCP service; straitd scrapes the sidecars'
// istio_* metrics again and the page, loaded by headless Chromium, shows
// the edge client → echo-v1 with 50 requests, 80.0% success and 50
// requests over its window as the rate, and client → raw with TCP bytes
// and connections (DOM); the first drawn in the failing colour and the
// second in the TCP colour between the workloads' positions of the
// deterministic layout (screenshot); every proxy's xDS types SYNCED.
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
			echoPod("raw", "demo", "10.99.0.12", "raw"),
		},
	})
	client := m.Pod("client")
	c := client.NewHTTPClient(false)
	waitOK(ctx, t, c, localmesh.DemoURL)
	const tcpURL = "http://240.240.0.11:9000/" // echo-tcp: a TCP service
	waitOK(ctx, t, c, tcpURL)
	pageURL := "http://" + m.MonitoringAddr() + meshview.Path

	// The first view starts the scrapes; the traffic comes once both
	// sidecars have a scrape to compare with.
	rounds := regexp.MustCompile(`(\d+) scrape rounds`)
	waitFor(ctx, t, 30*time.Second, "a first scrape of the sidecars", func() error {
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
		if bytes.Contains(page, []byte(`class="err"`)) || bytes.Count(page, []byte(`ago</td></tr>`)) != 3 {
			return fmt.Errorf("the proxies are not all scraped:\n%s", proxyTable(page))
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
	// A connection per request: each one is opened, closed and reported.
	for i := range 5 {
		if r := send(ctx, client.NewHTTPClient(false), "GET", tcpURL, "", nil); r.err != nil || r.status != 200 {
			t.Fatalf("TCP service, request %d: %v", i, r)
		}
	}

	edge := regexp.MustCompile(`(?s)<tr class="edge" data-source="demo/client" data-destination="demo/echo-v1">(.*?)</tr>`)
	tcpEdge := regexp.MustCompile(`(?s)<tr class="edge" data-source="demo/client" data-destination="demo/raw">(.*?)</tr>`)
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
		if mm := tcpEdge.FindSubmatch(page); mm == nil || !strings.HasSuffix(cell(mm[1], "tcp"), " conn/s") {
			return fmt.Errorf("no TCP edge demo/client → demo/raw:\n%s", edgeTable(page))
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
	tr := tcpEdge.FindSubmatch(dom)
	if tr == nil {
		t.Fatalf("the browser's DOM has no edge demo/client → demo/raw:\n%s", edgeTable(dom))
	}
	t.Logf("TCP edge: requests %s, %s", cell(tr[1], "requests"), cell(tr[1], "tcp"))
	if got := cell(tr[1], "requests"); got != "0" {
		t.Errorf("TCP edge: requests %q, want 0", got)
	}
	if got := cell(tr[1], "tcp"); !strings.HasSuffix(got, " conn/s") || strings.HasPrefix(got, "0 B/s") {
		t.Errorf("TCP edge: %q, want its bytes and connections per second", got)
	}
	for _, pod := range []string{"client", "echo-v1", "raw"} {
		pr := regexp.MustCompile(`(?s)<tr class="proxy" data-proxy="sidecar~[^~]+~` + regexp.QuoteMeta(pod) + `\.demo~[^"]*">(.*?)</tr>`).FindSubmatch(dom)
		if pr == nil {
			t.Errorf("no proxy row for %s:\n%s", pod, proxyTable(dom))
			continue
		}
		if n := bytes.Count(pr[1], []byte(`<td class="SYNCED"`)); n != 4 {
			t.Errorf("%s: %d xDS types SYNCED, want CDS, LDS, RDS and EDS:\n%s", pod, n, pr[1])
		}
	}

	// What the browser draws: each edge's colour along the line between
	// its workloads, which the layout places deterministically (the
	// graph's nodes sorted: demo/client, demo/echo-v1, demo/raw). The
	// middle of a line, under its label, is not looked at.
	shot := filepath.Join(dir, "mesh.png")
	runChromium(ctx, t, chromium, dir, "--screenshot="+shot, "--window-size=1000,800", pageURL)
	img := decodePNG(t, shot)
	pos := meshview.Layout(3)
	for _, line := range []struct {
		name     string
		from, to meshview.Point
		colour   string
	}{
		{"client → echo-v1", pos[0], pos[1], meshview.ColourFailing},
		{"client → raw", pos[0], pos[2], meshview.ColourTCP},
	} {
		want := hexColour(t, line.colour)
		onLine, samples := 0, 0
		length := math.Hypot(line.to.X-line.from.X, line.to.Y-line.from.Y)
		for i := 1; i < 40; i++ {
			f := float64(i) / 40
			if d := f * length; d < meshview.NodeRadius+8 || length-d < meshview.NodeRadius+14 || (f > 0.3 && f < 0.7) {
				continue // inside a node, under the arrow head or the label
			}
			samples++
			x, y := line.from.X+(line.to.X-line.from.X)*f, line.from.Y+(line.to.Y-line.from.Y)*f
			if near(img.At(int(math.Round(x)), int(math.Round(y))), want) {
				onLine++
			}
		}
		if samples == 0 || onLine < samples*9/10 {
			t.Errorf("%s: the edge's colour %s at %d of %d points between %v and %v, want nearly all", line.name, line.colour, onLine, samples, line.from, line.to)
		}
	}
	// And nowhere else: far from the edges the canvas is blank.
	if p := img.At(meshview.CanvasWidth-40, meshview.CanvasHeight-40); near(p, hexColour(t, meshview.ColourFailing)) || near(p, hexColour(t, meshview.ColourTCP)) {
		t.Errorf("an edge's colour away from the edges: the screenshot is not the graph")
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
