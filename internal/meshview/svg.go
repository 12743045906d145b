package meshview

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strings"
)

// Edge colours by success rate, Kiali's traffic colours: an edge with
// 5xx above 5% is red, above 1% orange, else green; an edge with TCP
// traffic only is blue, as Kiali draws TCP; grey without traffic in the
// window.
const (
	ColourOK       = "#2e8b57"
	ColourDegraded = "#e69500"
	ColourFailing  = "#d62728"
	ColourTCP      = "#1f77b4"
	ColourIdle     = "#9e9e9e"
)

// tcpOnly reports whether the edge carried TCP traffic and no request.
func tcpOnly(e Edge) bool { return e.Requests == 0 && (e.TCPBytes > 0 || e.TCPConnections > 0) }

// EdgeColour is the stroke colour of an edge.
func EdgeColour(e Edge) string {
	sr := e.SuccessRate()
	switch {
	case tcpOnly(e):
		return ColourTCP
	case math.IsNaN(sr):
		return ColourIdle
	case sr < 0.95:
		return ColourFailing
	case sr < 0.99:
		return ColourDegraded
	}
	return ColourOK
}

// FormatRate prints an edge's rate in requests per second, as the page
// and its labels show it.
func FormatRate(e Edge) string { return fmt.Sprintf("%.2f rps", e.Rate) }

// FormatTCP prints an edge's TCP byte and connection rates, "-" without
// TCP traffic.
func FormatTCP(e Edge) string {
	if e.TCPBytes == 0 && e.TCPConnections == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/s · %.2f conn/s", formatBytes(e.ByteRate), e.ConnectionRate)
}

func formatBytes(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1f MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kB", v/1e3)
	}
	return fmt.Sprintf("%.0f B", v)
}

// FormatSuccess prints the success rate with one decimal.
func FormatSuccess(e Edge) string {
	sr := e.SuccessRate()
	if math.IsNaN(sr) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*sr)
}

// FormatP99 prints the p99 in milliseconds.
func FormatP99(e Edge) string {
	if math.IsNaN(e.P99) {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", e.P99)
}

type svgNode struct {
	X, Y            float64
	Name, Namespace string
}

type svgEdge struct {
	X1, Y1, X2, Y2 float64
	LX, LY         float64
	Colour, Label  string
	Title          string
}

var svgTemplate = template.Must(template.New("svg").Parse(`<svg xmlns="http://www.w3.org/2000/svg" id="graph" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" font-family="sans-serif" font-size="13">
<rect width="{{.W}}" height="{{.H}}" fill="#ffffff"/>
<defs>{{range .Colours}}<marker id="arrow-{{.ID}}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{{.Colour}}"/></marker>{{end}}</defs>
<text x="16" y="26" font-size="16" font-weight="bold">{{.Title}}</text>
{{- if not .Nodes}}
<text x="16" y="52" fill="#555">{{.Empty}}</text>
{{- end}}
{{- range .Edges}}
<g class="edge"><title>{{.Title}}</title><line x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}" stroke="{{.Colour}}" stroke-width="4" marker-end="url(#arrow-{{slice .Colour 1}})"/><text x="{{.LX}}" y="{{.LY}}" text-anchor="middle" fill="#222" stroke="#ffffff" stroke-width="4" paint-order="stroke">{{.Label}}</text></g>
{{- end}}
{{- range .Nodes}}
<g class="node"><circle cx="{{.X}}" cy="{{.Y}}" r="{{$.R}}" fill="#e8f0fb" stroke="#1f4e79" stroke-width="3"/><text x="{{.X}}" y="{{.Y}}" dy="{{$.NameDY}}" text-anchor="middle" font-weight="bold">{{.Name}}</text><text x="{{.X}}" y="{{.Y}}" dy="{{$.NsDY}}" text-anchor="middle" fill="#555">{{.Namespace}}</text></g>
{{- end}}
</svg>
`))

// RenderSVG draws g as a standalone SVG document: workloads on Layout's
// circle, each edge a line from source to destination in EdgeColour with
// its rate, success rate and p99. Two opposite edges are drawn side by
// side; a single edge runs straight between the two centres.
func RenderSVG(g Graph, title string) (template.HTML, error) {
	pos := map[Workload]Point{}
	for i, p := range Layout(len(g.Nodes)) {
		pos[g.Nodes[i]] = p
	}
	data := struct {
		W, H, R      int
		NameDY, NsDY int
		Title, Empty string
		Colours      []struct{ ID, Colour string }
		Nodes        []svgNode
		Edges        []svgEdge
	}{W: CanvasWidth, H: CanvasHeight, R: NodeRadius, NameDY: NodeRadius + 18, NsDY: NodeRadius + 34, Title: title,
		Empty: "No traffic in the window yet: rates appear after two scrapes of a proxy that served requests."}
	for _, c := range []string{ColourOK, ColourDegraded, ColourFailing, ColourTCP, ColourIdle} {
		data.Colours = append(data.Colours, struct{ ID, Colour string }{c[1:], c})
	}
	for _, n := range g.Nodes {
		p := pos[n]
		ns := n.Namespace
		if ns == "unknown" {
			ns = ""
		}
		data.Nodes = append(data.Nodes, svgNode{X: p.X, Y: p.Y, Name: n.Name, Namespace: ns})
	}
	reverse := map[EdgeKey]bool{}
	for _, e := range g.Edges {
		reverse[EdgeKey{Source: e.Destination, Destination: e.Source}] = true
	}
	for _, e := range g.Edges {
		a, b := pos[e.Source], pos[e.Destination]
		dx, dy := b.X-a.X, b.Y-a.Y
		l := math.Hypot(dx, dy)
		if l < 2*NodeRadius+10 { // a workload calling itself: no line to draw
			continue
		}
		ux, uy := dx/l, dy/l
		off := 0.0
		if reverse[e.EdgeKey] {
			off = 7 // to the right of the direction of travel
		}
		nx, ny := -uy*off, ux*off
		start, end := NodeRadius+4.0, NodeRadius+6.0
		services := ""
		if len(e.Services) > 0 {
			services = " (" + strings.Join(e.Services, ", ") + ")"
		}
		label := FormatRate(e) + " · " + FormatSuccess(e) + " · p99 " + FormatP99(e)
		if tcpOnly(e) {
			label = FormatTCP(e)
		}
		data.Edges = append(data.Edges, svgEdge{
			X1: round1(a.X + ux*start + nx), Y1: round1(a.Y + uy*start + ny),
			X2: round1(b.X - ux*end + nx), Y2: round1(b.Y - uy*end + ny),
			LX: round1((a.X+b.X)/2 + nx*3), LY: round1((a.Y+b.Y)/2 + ny*3 - 10),
			Colour: EdgeColour(e), Label: label,
			Title: fmt.Sprintf("%s → %s%s: %.0f requests, %.0f 5xx, %.0f TCP bytes, %.0f TCP connections over %s, reported by %s",
				e.Source, e.Destination, services, e.Requests, e.ServerErrors, e.TCPBytes, e.TCPConnections, e.Window.Round(100_000_000), e.Reporter),
		})
	}
	var buf bytes.Buffer
	if err := svgTemplate.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("render graph: %w", err)
	}
	return template.HTML(buf.String()), nil // html/template escaped every value
}
