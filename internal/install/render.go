// Package install renders Strait's Helm chart (manifests/charts/strait)
// and applies it to a cluster with server-side apply, waits for straitd,
// and removes what it applied: the engine of `straitctl install` and
// `straitctl uninstall`. Rendering is Helm's own (chart loader, values
// schema, template engine), so the objects are those `helm template`
// prints for the same values.
package install

import (
	"cmp"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/manifests"
)

// Defaults of RenderOptions.
const (
	DefaultNamespace = "istio-system"
	DefaultRelease   = "strait"
)

// Label keys that mark what the chart creates; uninstall selects on them.
const (
	InstanceLabel = "app.kubernetes.io/instance"
	PartOfLabel   = "app.kubernetes.io/part-of"
	PartOfValue   = "strait"
)

// LoadChart loads the embedded chart.
func LoadChart() (*chart.Chart, error) {
	return LoadChartFS(manifests.Chart())
}

// LoadChartFS loads a chart from a file system rooted at the chart
// directory.
func LoadChartFS(fsys fs.FS) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: p, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chart: %w", err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	return c, nil
}

// RenderOptions configure Render.
type RenderOptions struct {
	// Namespace is the release namespace (default istio-system).
	Namespace string
	// Release is the release name (default strait); every object carries
	// it in app.kubernetes.io/instance.
	Release string
	// Values are the user's values (from -f files and --set), laid over the
	// chart's values.yaml; the chart's schema refuses unknown keys.
	Values map[string]any
}

func (o RenderOptions) withDefaults() RenderOptions {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Release == "" {
		o.Release = DefaultRelease
	}
	return o
}

// Rendered are the chart's objects: the CRDs (the chart's crds/
// directory, applied first) and the templates' objects in Helm's install
// order.
type Rendered struct {
	CRDs    []*unstructured.Unstructured
	Objects []*unstructured.Unstructured
}

// All returns CRDs then Objects.
func (r Rendered) All() []*unstructured.Unstructured {
	return append(slices.Clone(r.CRDs), r.Objects...)
}

// Render renders c with opts. Every object, CRDs included, carries the
// instance and part-of labels.
func Render(c *chart.Chart, opts RenderOptions) (Rendered, error) {
	opts = opts.withDefaults()
	vals := opts.Values
	if vals == nil {
		vals = map[string]any{}
	}
	renderVals, err := chartutil.ToRenderValuesWithSchemaValidation(c, vals,
		chartutil.ReleaseOptions{Name: opts.Release, Namespace: opts.Namespace, IsInstall: true, Revision: 1},
		chartutil.DefaultCapabilities, false)
	if err != nil {
		return Rendered{}, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(c, renderVals)
	if err != nil {
		return Rendered{}, fmt.Errorf("render chart: %w", err)
	}
	var out Rendered
	for _, crd := range c.CRDObjects() {
		objs, err := decodeAll(crd.Filename, crd.File.Data)
		if err != nil {
			return Rendered{}, err
		}
		out.CRDs = append(out.CRDs, objs...)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		base := name[strings.LastIndex(name, "/")+1:]
		if strings.HasPrefix(base, "_") || strings.HasSuffix(base, ".txt") {
			continue
		}
		objs, err := decodeAll(name, []byte(files[name]))
		if err != nil {
			return Rendered{}, err
		}
		out.Objects = append(out.Objects, objs...)
	}
	slices.SortStableFunc(out.Objects, func(a, b *unstructured.Unstructured) int {
		return installRank(a.GetKind()) - installRank(b.GetKind())
	})
	for _, o := range out.All() {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[InstanceLabel] = opts.Release
		labels[PartOfLabel] = PartOfValue
		o.SetLabels(labels)
	}
	return out, nil
}

// installRank is kind's place in Helm's install order (unknown kinds
// last).
func installRank(kind string) int {
	if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
		return i
	}
	return len(releaseutil.InstallOrder)
}

// decodeAll splits a multi-document YAML file into objects (Helm's
// splitting), skipping empty documents.
func decodeAll(file string, data []byte) ([]*unstructured.Unstructured, error) {
	docs := releaseutil.SplitManifests(string(data))
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	// manifest-N: keep the file's order.
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	var out []*unstructured.Unstructured
	for _, k := range keys {
		js, err := yaml.YAMLToJSON([]byte(docs[k]))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", file, k, err)
		}
		if t := strings.TrimSpace(string(js)); t == "null" || t == "{}" || t == "" {
			continue
		}
		// The unstructured decoder keeps integers as int64, as the API
		// machinery expects.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", file, k, err)
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: %s has no apiVersion, kind or metadata.name", file, k)
		}
		out = append(out, u)
	}
	return out, nil
}
