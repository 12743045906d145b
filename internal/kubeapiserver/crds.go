package kubeapiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// GatewayAPIVersion is the sigs.k8s.io/gateway-api release whose CRDs
// InstallGatewayAPICRDs installs.
const GatewayAPIVersion = "v1.6.3"

// GatewayAPIChannel is a release channel of the Gateway API CRDs: the
// directory of config/crd it is read from, and the value of their
// gateway.networking.k8s.io/channel annotation.
type GatewayAPIChannel string

// The Gateway API's release channels. The experimental CRDs are a
// superset: the same kinds with the experimental fields in their schemas
// (an HTTPRoute rule's retry, for one) and the experimental kinds. The API
// server prunes from a stored object every field its CRD's schema lacks,
// so a field of the experimental channel never reaches a controller on a
// cluster with the standard CRDs.
const (
	GatewayAPIStandard     GatewayAPIChannel = "standard"
	GatewayAPIExperimental GatewayAPIChannel = "experimental"
)

// CRDResource is the API resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// IstioCRDs returns the Istio CRDs, read from
// kubernetes/customresourcedefinitions.gen.yaml of the istio.io/api module
// that the main module requires (so they always match the istio.io/api
// types the code is built with). It asks the go command where the module
// is; run it from inside the module.
func IstioCRDs() ([]*unstructured.Unstructured, error) {
	dir, err := moduleDir("istio.io/api", "")
	if err != nil {
		return nil, err
	}
	return readCRDFiles(filepath.Join(dir, "kubernetes", "customresourcedefinitions.gen.yaml"))
}

// GatewayAPICRDs returns the standard-channel CRDs of sigs.k8s.io/gateway-api
// at GatewayAPIVersion, from the module cache (downloaded on first use).
func GatewayAPICRDs() ([]*unstructured.Unstructured, error) {
	return GatewayAPIChannelCRDs(GatewayAPIStandard)
}

// GatewayAPIChannelCRDs returns the CRDs of one channel of
// sigs.k8s.io/gateway-api at GatewayAPIVersion.
func GatewayAPIChannelCRDs(channel GatewayAPIChannel) ([]*unstructured.Unstructured, error) {
	if channel != GatewayAPIStandard && channel != GatewayAPIExperimental {
		return nil, fmt.Errorf("gateway API channel %q: want %s or %s", channel, GatewayAPIStandard, GatewayAPIExperimental)
	}
	dir, err := moduleDir("sigs.k8s.io/gateway-api", GatewayAPIVersion)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "config", "crd", string(channel), "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s/config/crd/%s (%w)", dir, channel, err)
	}
	sort.Strings(files)
	return readCRDFiles(files...)
}

var moduleDirs sync.Map // "path@version" → dir

// moduleDir returns the module cache directory of a module: the version the
// main module requires when version is empty, else that version.
func moduleDir(path, version string) (string, error) {
	key := path + "@" + version
	if d, ok := moduleDirs.Load(key); ok {
		return d.(string), nil
	}
	var cmd *exec.Cmd
	if version == "" {
		cmd = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path)
	} else {
		cmd = exec.Command("go", "mod", "download", "-json", key)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate module %s: %w: %s", key, err, strings.TrimSpace(stderr.String()))
	}
	dir := strings.TrimSpace(string(out))
	if version != "" {
		var info struct{ Dir, Error string }
		if err := json.Unmarshal(out, &info); err != nil {
			return "", fmt.Errorf("locate module %s: %w", key, err)
		}
		if info.Error != "" {
			return "", fmt.Errorf("locate module %s: %s", key, info.Error)
		}
		dir = info.Dir
	}
	if dir == "" {
		return "", fmt.Errorf("locate module %s: the go command returned no directory (is the module downloaded?)", key)
	}
	moduleDirs.Store(key, dir)
	return dir, nil
}

// readCRDFiles returns the CustomResourceDefinition documents of the files;
// other documents are skipped.
func readCRDFiles(files ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 64<<10)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			u := &unstructured.Unstructured{Object: obj}
			if obj == nil || u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s", strings.Join(files, ", "))
	}
	return out, nil
}

// InstallCRDs creates the CRDs (replacing existing ones of the same name)
// and waits until the API server serves every one of them.
func InstallCRDs(ctx context.Context, client dynamic.Interface, crds []*unstructured.Unstructured) error {
	api := client.Resource(CRDResource)
	for _, crd := range crds {
		crd = crd.DeepCopy()
		_, err := api.Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *unstructured.Unstructured
			if cur, err = api.Get(ctx, crd.GetName(), metav1.GetOptions{}); err == nil {
				crd.SetResourceVersion(cur.GetResourceVersion())
				_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, client, crd.GetName()); err != nil {
			return err
		}
	}
	return nil
}

// UninstallCRDs deletes the CRDs by name and waits until they are gone.
func UninstallCRDs(ctx context.Context, client dynamic.Interface, crds []*unstructured.Unstructured) error {
	api := client.Resource(CRDResource)
	for _, crd := range crds {
		if err := api.Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		for {
			_, err := api.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("delete CRD %s: %w", crd.GetName(), err)
			}
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, client dynamic.Interface, name string) error {
	for {
		u, err := client.Resource(CRDResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil && crdEstablished(u) {
			return nil
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
}

// crdEstablished reports whether a CRD has condition Established=True.
func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
