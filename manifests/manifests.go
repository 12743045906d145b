// Package manifests holds Strait's Helm chart (charts/strait), embedded so
// straitctl install renders the same chart that `helm install` does.
package manifests

import (
	"embed"
	"io/fs"
)

//go:embed all:charts/strait
var charts embed.FS

// ChartName is the chart's directory under charts/.
const ChartName = "strait"

// Chart returns the chart's files, rooted at the chart directory
// (Chart.yaml, values.yaml, templates/, crds/).
func Chart() fs.FS {
	sub, err := fs.Sub(charts, "charts/"+ChartName)
	if err != nil {
		// The path is a constant embedded above; Sub fails only on an
		// invalid path.
		panic(err)
	}
	return sub
}
