package meshview

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/debugapi"
)

// Path is where straitd serves the page on its monitoring port.
const Path = "/debug/mesh"

// SyncCell is one xDS type of one proxy in the sync table, as
// `straitctl proxy-status` reads it: the version and nonce last sent and
// last ACKed, and a NACK's error.
type SyncCell struct {
	// State is SYNCED (the last sent nonce was ACKed), STALE (sent, not
	// ACKed yet), NACK (the proxy refused it) or NOT SENT.
	State                     string
	VersionSent, VersionAcked string
	NonceSent, NonceAcked     string
	NackError                 string
}

// ProxyRow is one proxy of the sync table.
type ProxyRow struct {
	ProxyID, IP string
	Types       map[string]SyncCell // by CDS, LDS, RDS, EDS
	Others      []string            // other watched types, as labels
	Scrape      ScrapeStatus
}

// syncTypes are the columns of the sync table.
var syncTypes = []string{"CDS", "LDS", "RDS", "EDS"}

func typeColumn(typeURL string) string {
	switch typeURL[strings.LastIndexByte(typeURL, '.')+1:] {
	case "Cluster":
		return "CDS"
	case "Listener":
		return "LDS"
	case "RouteConfiguration":
		return "RDS"
	case "ClusterLoadAssignment":
		return "EDS"
	}
	return ""
}

func syncCell(w debugapi.WatchedStatus) SyncCell {
	c := SyncCell{VersionSent: w.VersionSent, VersionAcked: w.VersionAcked, NonceSent: w.NonceSent, NonceAcked: w.NonceAcked, NackError: w.NackError}
	switch {
	case w.NonceSent == "":
		c.State = "NOT SENT"
	case w.NonceAcked == w.NonceSent:
		c.State = "SYNCED"
	case w.NackError != "" && w.NonceNacked == w.NonceSent:
		c.State = "NACK"
	default:
		c.State = "STALE"
	}
	return c
}

// proxyRows merges the connections (one row per node id, its newest
// connection with xDS types first) with the scrape statuses.
func proxyRows(cons []debugapi.ConnectionStatus, scrapes map[string]ScrapeStatus) []ProxyRow {
	rows := map[string]*ProxyRow{}
	var order []string
	for _, c := range cons {
		r := rows[c.ProxyID]
		if r == nil {
			r = &ProxyRow{ProxyID: c.ProxyID, IP: c.IP, Types: map[string]SyncCell{}, Scrape: scrapes[c.ProxyID]}
			rows[c.ProxyID] = r
			order = append(order, c.ProxyID)
		}
		for _, w := range c.Watched {
			col := typeColumn(w.TypeURL)
			if col == "" {
				label := w.TypeURL[strings.LastIndexByte(w.TypeURL, '.')+1:]
				if !slices.Contains(r.Others, label) {
					r.Others = append(r.Others, label)
				}
				continue
			}
			r.Types[col] = syncCell(w)
		}
	}
	slices.Sort(order)
	out := make([]ProxyRow, 0, len(order))
	for _, id := range order {
		out = append(out, *rows[id])
	}
	return out
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"rate": FormatRate, "success": FormatSuccess, "p99": FormatP99, "tcp": FormatTCP,
	"colour": EdgeColour,
	"secs":   func(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) },
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return now.Sub(t).Round(100*time.Millisecond).String() + " ago"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>Strait mesh</title>
<style>
body{margin:0;font-family:sans-serif;font-size:14px;color:#222}
svg{display:block}
section{padding:4px 16px 16px}
table{border-collapse:collapse;margin:6px 0 12px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.n{text-align:right}
.SYNCED{color:#2e8b57}.STALE{color:#e69500}.NACK{color:#d62728;font-weight:bold}
.err{color:#d62728}
</style></head>
<body>
{{.SVG}}
<section>
<p id="summary">Rates over the last {{secs .Window}} of the proxies' istio_requests_total, istio_request_duration_milliseconds and istio_tcp_* (reporter="destination" where the destination has a proxy, else "source"); success is the share of non-5xx responses; {{.Rounds}} scrape rounds of port {{.Port}} every {{secs .Interval}}, page refreshed every {{.Refresh}}s.</p>
<h2>Edges</h2>
<table id="edges"><tr><th>source</th><th>destination</th><th>services</th><th>requests</th><th>5xx</th><th>over</th><th>rate</th><th>success</th><th>p99</th><th>TCP</th><th>reporter</th></tr>
{{- range .Graph.Edges}}
<tr class="edge" data-source="{{.Source}}" data-destination="{{.Destination}}"><td>{{.Source}}</td><td>{{.Destination}}</td><td>{{range $i, $s := .Services}}{{if $i}}, {{end}}{{$s}}{{end}}</td><td class="n requests">{{printf "%.0f" .Requests}}</td><td class="n errors">{{printf "%.0f" .ServerErrors}}</td><td class="n window">{{printf "%.2fs" .Window.Seconds}}</td><td class="n rate">{{rate .}}</td><td class="n success" style="color:{{colour .}}">{{success .}}</td><td class="n p99">{{p99 .}}</td><td class="n tcp">{{tcp .}}</td><td>{{.Reporter}}</td></tr>
{{- else}}
<tr><td colspan="11">no traffic in the window</td></tr>
{{- end}}
</table>
<h2>Proxies</h2>
<table id="proxies"><tr><th>proxy</th><th>IP</th>{{range .SyncTypes}}<th>{{.}}</th>{{end}}<th>other</th><th>metrics scrape</th></tr>
{{- range $r := .Proxies}}
<tr class="proxy" data-proxy="{{$r.ProxyID}}"><td>{{$r.ProxyID}}</td><td>{{$r.IP}}</td>
{{- range $t := $.SyncTypes}}{{with index $r.Types $t}}<td class="{{.State}}" title="sent {{.VersionSent}} (nonce {{.NonceSent}}), acked {{.VersionAcked}} (nonce {{.NonceAcked}}){{if .NackError}}; NACK: {{.NackError}}{{end}}">{{.State}}<br><small>sent {{.VersionSent}} / acked {{.VersionAcked}}</small></td>{{else}}<td>-</td>{{end}}{{end}}
<td>{{range $i, $o := $r.Others}}{{if $i}}, {{end}}{{$o}}{{end}}</td>
<td>{{if $r.Scrape.Err}}<span class="err">{{$r.Scrape.Err}}</span>{{else}}{{ago $.Now $r.Scrape.At}}{{end}}</td></tr>
{{- else}}
<tr><td colspan="8">no proxy connected</td></tr>
{{- end}}
</table>
</section>
</body></html>
`))

// Handler serves the page: it marks the page viewed (starting the scrapes
// when they were idle) and renders the graph of the scrapes so far.
func (s *Scraper) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.Viewed()
		g := s.Graph()
		statuses, rounds := s.Statuses()
		svg, err := RenderSVG(g, fmt.Sprintf("Strait mesh: workloads, last %s", s.opts.Window))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		refresh := int(s.opts.Interval.Seconds())
		if refresh < 1 {
			refresh = 1
		}
		var buf bytes.Buffer
		err = pageTemplate.Execute(&buf, map[string]any{
			"SVG": svg, "Graph": g, "Window": s.opts.Window, "Interval": s.opts.Interval, "Port": s.opts.Port,
			"Rounds": rounds, "Refresh": refresh, "SyncTypes": syncTypes, "Now": time.Now(),
			"Proxies": proxyRows(s.opts.Proxies.Connections(), statuses),
		})
		if err != nil {
			http.Error(w, "render mesh page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(buf.Bytes()) // the client went away; nothing to do
	})
}
