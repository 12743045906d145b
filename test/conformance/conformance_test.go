//go:build conformance

// The suite's run is behind the conformance build tag: `go test ./...`
// (make test) leaves it out; `make gateway-conformance` sets the tag.

package conformance

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	upstream "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/images"
	"github.com/straitmesh/strait/internal/install"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/kubenode"
	"github.com/straitmesh/strait/internal/testreq"
)

// envReport is where the ConformanceReport YAML is written (default
// gateway-conformance-report.yaml in the test's directory).
const envReport = "STRAIT_CONFORMANCE_REPORT"

// imageTag tags the images the harness builds and imports.
const imageTag = "conformance"

// TestGatewayAPIConformance runs the Gateway API conformance suite against
// Strait: Strait's images and the suite's echo backend built here and
// imported into the one-node cluster's containerd, the Gateway API CRDs
// of the experimental channel, straitd installed as `straitctl install`
// does, the GatewayClass istio, and then the suite with the features Strait claims (supportedFeatures).
// It writes the suite's ConformanceReport and prints a summary: each
// profile's result, the features, and every test passed, failed or
// skipped, each skip with its reason.
func TestGatewayAPIConformance(t *testing.T) {
	testreq.Privileged(t, "the Gateway API conformance suite on a one-node cluster")
	if err := kubenode.Available(); err != nil {
		testreq.Missing(t, "no Kubernetes node: %v", err)
	}
	profiles, err := parseProfiles(os.Getenv(envProfiles))
	if err != nil {
		t.Fatal(err)
	}
	reportPath := os.Getenv(envReport)
	if reportPath == "" {
		reportPath = "gateway-conformance-report.yaml"
	}
	if reportPath, err = filepath.Abs(reportPath); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	// Not deferred: the suite's parallel tests run after this function
	// returns, and the load balancer (lbCtx) must serve them too.
	t.Cleanup(cancel)

	dir := t.TempDir()
	mesh := hasMesh(profiles)
	tars, echo := buildImages(ctx, t, dir, mesh)
	node := kubenode.Start(t, kubenode.Options{Images: tars})
	unroute, err := routeServiceCIDR(ctx, node.IP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unroute(); err != nil {
			t.Error(err)
		}
	})
	lbCtx, stopLB := context.WithCancel(ctx)
	var lbDone sync.WaitGroup
	lbDone.Go(func() { serveLoadBalancer(lbCtx, node.API.Client, t.Logf) })
	t.Cleanup(func() { stopLB(); lbDone.Wait() })

	// The experimental channel: Strait claims experimental features
	// (HTTPRouteRetry, HTTPRouteDestinationPortMatching), whose fields
	// the standard CRDs' schemas lack and the API server prunes.
	if err := node.API.InstallGatewayAPIChannelCRDs(ctx, kubeapiserver.GatewayAPIExperimental); err != nil {
		t.Fatal(err)
	}
	installStrait(ctx, t, node)
	createGatewayClass(ctx, t, node)

	manifests, err := rewriteManifests(&upstream.Manifests, echo)
	if err != nil {
		t.Fatal(err)
	}
	opts := suiteOptions(t, node, profiles, []fs.FS{manifests})
	if mesh {
		// The suite's namespaces join the mesh: straitd's webhook injects
		// their pods, the echo clients' requests among them.
		opts.NamespaceLabels = map[string]string{"istio-injection": "enabled"}
	}
	opts.ReportOutputPath = reportPath
	results := map[string]string{}
	var mu sync.Mutex
	opts.Hook = func(t *testing.T, test suite.ConformanceTest, _ *suite.ConformanceTestSuite) {
		res := "passed"
		switch {
		case t.Failed():
			res = "failed"
		case t.Skipped():
			res = "skipped"
		}
		mu.Lock()
		results[test.ShortName] = res
		mu.Unlock()
	}
	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The report is complete only once the parallel tests are done, after
	// this function returns: in a cleanup, registered before the suite's
	// own (which ends its run) so that it runs after it.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if err := writeReport(cSuite, opts, reportPath, results); err != nil {
			t.Error(err)
		}
	})
	cSuite.Setup(t, tests.ConformanceTests)
	if err := cSuite.Run(t, tests.ConformanceTests); err != nil {
		t.Fatal(err)
	}
}

// writeReport writes the suite's ConformanceReport YAML to reportPath and
// the summary next to it (NAME-summary.txt), and prints the summary: it
// is `make gateway-conformance`'s output.
func writeReport(cSuite *suite.ConformanceTestSuite, opts suite.ConformanceOptions, reportPath string, results map[string]string) error {
	report, err := cSuite.Report()
	if err != nil {
		return err
	}
	raw, err := yaml.Marshal(report)
	if err != nil {
		return err
	}
	if err := os.WriteFile(reportPath, raw, 0o644); err != nil {
		return err
	}
	summary := fmt.Sprintf("Gateway API conformance (sigs.k8s.io/gateway-api %s, %s)\nreport: %s\n%s",
		report.GatewayAPIVersion, report.Date, reportPath, summarize(report, tests.ConformanceTests, opts, results))
	summaryPath := strings.TrimSuffix(reportPath, filepath.Ext(reportPath)) + "-summary.txt"
	if err := os.WriteFile(summaryPath, []byte(summary), 0o644); err != nil {
		return err
	}
	fmt.Print("\n" + summary)
	return nil
}

// buildImages builds Strait's images (as TestKubeSeedFlow does) and the
// suite's echo backend from the conformance module's source, static, and,
// for a MESH run, the mesh's backend (Istio's echo, echo-advanced); it
// returns the tarballs and the echo images' names.
func buildImages(ctx context.Context, t *testing.T, dir string, mesh bool) ([]string, echoImages) {
	t.Helper()
	tars, err := kubenode.StraitImages(ctx, dir, "strait", imageTag)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "echo-basic")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "sigs.k8s.io/gateway-api/conformance/echo-basic")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build echo-basic: %v: %s", err, out)
	}
	scratch := filepath.Join(dir, "echo-scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err := images.ConformanceEchoSpec(bin, scratch)
	if err != nil {
		t.Fatal(err)
	}
	specs := []images.Spec{spec}
	names := echoImages{Basic: "strait/" + images.ConformanceEchoName + ":" + imageTag}
	if mesh {
		adv, err := echoAdvancedSpec(ctx, t, dir)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, adv)
		names.Advanced = "strait/" + images.ConformanceEchoAdvancedName + ":" + imageTag
	}
	echo, err := images.WriteAll(ctx, specs, images.WriteOptions{Hub: "strait", Tag: imageTag, OutDir: filepath.Join(dir, "images")})
	if err != nil {
		t.Fatal(err)
	}
	return append(tars, echo...), names
}

// echoAdvancedSpec builds Istio's echo server and client from the
// istio.io/istio module (hack/istio-build.sh, cached) and a self-signed
// pair for the TLS port the mesh manifests give it, and returns the
// echo-advanced image's spec.
func echoAdvancedSpec(ctx context.Context, t *testing.T, dir string) (images.Spec, error) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "istio-build.sh"))
	if err != nil {
		return images.Spec{}, err
	}
	build := func(name, pkg string) (string, error) {
		t.Logf("building %s (istio.io/istio %s; minutes the first time)", name, pkg)
		cmd := exec.CommandContext(ctx, script, name, pkg)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%s %s %s: %w", script, name, pkg, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1], nil
	}
	var in images.EchoAdvancedFiles
	if in.Server, err = build("istio-echo-server", "istio.io/istio/pkg/test/echo/cmd/server"); err != nil {
		return images.Spec{}, err
	}
	if in.Client, err = build("istio-echo-client", "istio.io/istio/pkg/test/echo/cmd/client"); err != nil {
		return images.Spec{}, err
	}
	in.Cert, in.Key = filepath.Join(dir, "echo-cert.crt"), filepath.Join(dir, "echo-cert.key")
	if err := writeSelfSigned(in.Cert, in.Key, "echo"); err != nil {
		return images.Spec{}, err
	}
	scratch := filepath.Join(dir, "echo-advanced-scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return images.Spec{}, err
	}
	return images.ConformanceEchoAdvancedSpec(in, scratch)
}

// writeSelfSigned writes a self-signed ECDSA certificate for name (a
// year) and its key, PEM.
func writeSelfSigned(certPath, keyPath, name string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
}

// installStrait installs the chart as `straitctl install --set
// global.tag=conformance` does, and waits for straitd.
func installStrait(ctx context.Context, t *testing.T, node *kubenode.Node) {
	t.Helper()
	vals, err := install.MergeValues(nil, []string{"global.tag=" + imageTag}, nil)
	if err != nil {
		t.Fatal(err)
	}
	chart, err := install.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	r, err := install.Render(chart, install.RenderOptions{Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	c, err := install.NewClient(node.API.Config, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, r, install.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, install.DefaultNamespace, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// createGatewayClass creates the GatewayClass istio (Istio's installer
// creates it; the suite expects it).
func createGatewayClass(ctx context.Context, t *testing.T, node *kubenode.Node) {
	t.Helper()
	gc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "GatewayClass",
		"metadata":   map[string]any{"name": gatewayClass},
		"spec":       map[string]any{"controllerName": "istio.io/gateway-controller"},
	}}
	gvr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	if _, err := node.API.Dynamic.Resource(gvr).Create(ctx, gc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gatewayClass is the class the suite's Gateways use.
const gatewayClass = "istio"

// suiteOptions are the suite's options for node: its clients, the class,
// the features Strait claims, the profiles and the tests skipped.
func suiteOptions(t *testing.T, node *kubenode.Node, profiles []suite.ConformanceProfileName, manifests []fs.FS) suite.ConformanceOptions {
	t.Helper()
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	cfg := rest.CopyConfig(node.API.Config) // the suite sets its UserAgent per test
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, add := range []func(*runtime.Scheme) error{
		gwv1.Install, v1beta1.Install, v1alpha2.Install, v1alpha3.Install, xv1alpha1.Install, apiextensionsv1.AddToScheme,
	} {
		if err := add(c.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	timeouts := suiteTimeouts()
	skip := slices.Sorted(maps.Keys(skippedTests))
	if v := os.Getenv(envSkip); v != "" {
		skip = append(skip, strings.Split(v, ",")...)
	}
	return suite.ConformanceOptions{
		Client:     c,
		Clientset:  node.API.Client,
		RestConfig: cfg,
		ManifestFS: manifests,
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     gatewayClass,
			CleanupBaseResources: false, // the node goes away with the test
			CleanupTestResources: true,
			SupportedFeatures:    supportedFeatures(hasMesh(profiles)),
			ConformanceProfiles:  profiles,
			SkipTests:            skip,
			RunTest:              os.Getenv(envRunTest),
			TimeoutConfig:        timeouts,
			Mode:                 "default",
			Implementation: confv1.Implementation{
				Organization: "straitmesh",
				Project:      "strait",
				URL:          "https://github.com/straitmesh/strait",
				Version:      "dev",
				Contact:      []string{"@straitmesh/maintainers"},
			},
		},
	}
}

// suiteTimeouts are the suite's defaults with more room for the first
// start of the base manifests' pods and for a change to reach a gateway
// on a loaded 2-core machine.
func suiteTimeouts() config.TimeoutConfig {
	c := config.DefaultTimeoutConfig()
	c.NamespacesMustBeReady = 10 * time.Minute
	c.MaxTimeToConsistency = time.Minute
	return c
}
