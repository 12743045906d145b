package status

// The app's own metrics on 15020's /stats/prometheus, as pilot-agent merges
// them (pilot/cmd/pilot-agent/status/server.go: handleStats,
// scrapeMultipleApps, allowedContentTypes, negotiateMetricsFormat): the
// injector keeps the pod's prometheus.io/port and /path in the agent's
// ISTIO_PROMETHEUS_ANNOTATIONS and points Prometheus at 15020; the agent
// scrapes the app on localhost with the Accept header Prometheus sent
// (narrowed to the text formats and OpenMetrics), and appends its bodies
// after the proxy's and the agent's. The response takes the app's format:
// text (0.0.4), or OpenMetrics when the app answered in it, with one
// "# EOF" at the very end. An app that fails, answers non-200 or sends
// more than maxAppBody bytes is left out and counted; the rest is served.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AppTarget is one of the app's metrics endpoints, on localhost.
type AppTarget struct {
	Port string
	Path string
}

func (t AppTarget) url() string {
	return "http://" + net.JoinHostPort("localhost", t.Port) + t.Path
}

// maxAppBody bounds what one app target may send (pilot-agent's
// defaultMaxAppMetricsBodyBytes).
const maxAppBody = 10 << 20

// The exposition formats, as pilot-agent names them in Content-Type.
const (
	FormatText           = "text/plain; version=0.0.4; charset=utf-8"
	FormatOpenMetrics001 = "application/openmetrics-text; version=0.0.1; charset=utf-8"
	FormatOpenMetrics100 = "application/openmetrics-text; version=1.0.0; charset=utf-8"
)

const openMetricsType = "application/openmetrics-text"

// The media types each source may be asked for: the proxy's stats are
// text only, the app may answer in OpenMetrics too.
var (
	proxyTypes = []string{"text/*", "text/plain"}
	appTypes   = []string{"text/*", "text/plain", openMetricsType}
)

// responseFormat is the Content-Type of a merged response whose app part
// came with contentType: OpenMetrics 0.0.1 or 1.0.0 as the app said, else
// text.
func responseFormat(contentType string) string {
	mt, params, err := mime.ParseMediaType(contentType)
	if err == nil && mt == openMetricsType {
		switch params["version"] {
		case "1.0.0":
			return FormatOpenMetrics100
		case "0.0.1", "":
			return FormatOpenMetrics001
		}
	}
	return FormatText
}

type mediaRange struct {
	typ    string
	params map[string]string
}

// acceptFor narrows Prometheus' Accept header to the media types a source
// serves, as pilot-agent's allowedContentTypes does: "*/*" and "*" become
// text 0.0.4, "application/*" becomes OpenMetrics 0.0.1, types the source
// does not serve are dropped, and what is left is re-weighted in its
// order. An Accept header that does not parse, or leaves nothing, asks for
// text 0.0.4.
func acceptFor(accept string, allowed []string) string {
	text := mediaRange{"text/plain", map[string]string{"version": "0.0.4"}}
	var kept []mediaRange
	seen := map[string]bool{}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			return mime.FormatMediaType(text.typ, text.params)
		}
		delete(params, "q")
		m := mediaRange{mt, params}
		switch mt {
		case "*/*", "*":
			m = mediaRange{text.typ, map[string]string{"version": "0.0.4"}}
		case "application/*":
			m = mediaRange{openMetricsType, map[string]string{"version": "0.0.1"}}
		}
		if !slices.Contains(allowed, m.typ) {
			continue
		}
		key := mime.FormatMediaType(m.typ, m.params)
		if seen[key] {
			continue
		}
		seen[key] = true
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		return mime.FormatMediaType(text.typ, text.params)
	}
	parts := make([]string, len(kept))
	for i, m := range kept {
		m.params["q"] = strconv.FormatFloat(float64(len(kept)-i)/float64(len(kept)+1), 'f', 3, 64)
		parts[i] = mime.FormatMediaType(m.typ, m.params)
	}
	return strings.Join(parts, ",")
}

// scrapeTimeout is Prometheus' X-Prometheus-Scrape-Timeout-Seconds, which
// pilot-agent honours for each scrape it makes.
func scrapeTimeout(h http.Header) (time.Duration, bool) {
	v := h.Get("X-Prometheus-Scrape-Timeout-Seconds")
	if v == "" {
		return 0, false
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs <= 0 {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// fetch GETs url for the scrape in, passing on its User-Agent and scrape
// timeout, with accept; it returns the body (at most limit bytes) and
// its Content-Type.
func (s *Server) fetch(in *http.Request, url, accept string, limit int64) ([]byte, string, error) {
	ctx := context.WithoutCancel(in.Context())
	if d, ok := scrapeTimeout(in.Header); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	for _, k := range []string{"User-Agent", "X-Prometheus-Scrape-Timeout-Seconds"} {
		if v := in.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("Accept", accept)
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, "", fmt.Errorf("scrape %s: status %s", url, resp.Status)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
		return nil, "", fmt.Errorf("scrape %s: read: %w", url, err)
	}
	if int64(buf.Len()) > limit {
		return nil, "", fmt.Errorf("scrape %s: the response exceeds %d bytes", url, limit)
	}
	return buf.Bytes(), resp.Header.Get("Content-Type"), nil
}

// scrapeApp scrapes every app target at once and returns their bodies in
// target order (nil for a target that failed) and the response's format:
// the first answering target's, or text when the targets disagree or none
// answered (pilot-agent's scrapeMultipleApps).
func (s *Server) scrapeApp(r *http.Request) (string, [][]byte) {
	targets := s.opts.AppTargets
	bodies := make([][]byte, len(targets))
	formats := make([]string, len(targets))
	accept := acceptFor(r.Header.Get("Accept"), appTypes)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			body, ct, err := s.fetch(r, t.url(), accept, maxAppBody)
			if err != nil {
				s.failures.app.Add(1)
				s.log.Warn("scrape app metrics", "target", t.url(), "error", err)
				return
			}
			bodies[i], formats[i] = body, responseFormat(ct)
		})
	}
	wg.Wait()
	format := ""
	for i, f := range formats {
		if bodies[i] == nil {
			continue
		}
		if format == "" {
			format = f
		} else if f != format {
			return FormatText, bodies
		}
	}
	if format == "" {
		format = FormatText
	}
	return format, bodies
}

var openMetricsEOF = []byte("# EOF")

// withoutEOF is body without a final "# EOF" line: the merged response
// carries one, at its end, when it is OpenMetrics.
func withoutEOF(body []byte) []byte {
	trimmed := bytes.TrimRight(body, " \t\r\n")
	if bytes.HasSuffix(trimmed, openMetricsEOF) {
		return trimmed[:len(trimmed)-len(openMetricsEOF)]
	}
	return body
}

// appendExposition appends body to buf and ends it with a newline.
func appendExposition(buf *bytes.Buffer, body []byte) {
	buf.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		buf.WriteByte('\n')
	}
}
