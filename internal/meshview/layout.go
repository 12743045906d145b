package meshview

import "math"

// Point is a position on the SVG canvas, in pixels from its top left.
type Point struct{ X, Y float64 }

// Canvas size and node radius of the graph, in CSS pixels.
const (
	CanvasWidth  = 960
	CanvasHeight = 540
	NodeRadius   = 30
)

// Layout places n nodes (in the order Build sorts them) on a circle
// around the canvas's centre, the first on the left and the others
// clockwise; a single node sits at the centre. The placement depends on
// n alone, so a page always draws the same graph the same way (and a test
// knows where to look).
func Layout(n int) []Point {
	cx, cy := CanvasWidth/2.0, CanvasHeight/2.0+10
	if n == 1 {
		return []Point{{cx, cy}}
	}
	r := math.Min(CanvasWidth, CanvasHeight)/2 - 80
	pts := make([]Point, n)
	for i := range pts {
		a := math.Pi + 2*math.Pi*float64(i)/float64(n)
		pts[i] = Point{X: round1(cx + r*math.Cos(a)), Y: round1(cy + r*math.Sin(a))}
	}
	return pts
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
