package images

import (
	"fmt"
	"os"
)

// ConformanceEchoName is the repository name (without hub) of the Gateway
// API conformance suite's echo backend: the suite's manifests name
// registry.k8s.io/gateway-api/echo-basic, which cannot be pulled here, so
// the harness builds it and rewrites the manifests to HUB/NAME:TAG.
const ConformanceEchoName = "gateway-echo-basic"

// ConformanceEchoUser is the user the upstream echo-basic image runs as
// (distroless's nonroot): the backend listens on unprivileged ports only.
const ConformanceEchoUser = "65532:65532"

// ConformanceEchoSpec returns the image of the conformance suite's echo
// backend: binary is a static build of
// sigs.k8s.io/gateway-api/conformance/echo-basic (CGO_ENABLED=0), laid at
// /echo-basic and run as the entrypoint, as the upstream Dockerfile does.
// scratch is a directory for generated files; it must outlive Build.
func ConformanceEchoSpec(binary, scratch string) (Spec, error) {
	if _, err := os.Stat(binary); err != nil {
		return Spec{}, fmt.Errorf("echo-basic binary: %w (build it first: CGO_ENABLED=0 go build -o %s sigs.k8s.io/gateway-api/conformance/echo-basic)", err, binary)
	}
	files, err := baseFiles(scratch)
	if err != nil {
		return Spec{}, err
	}
	files = append(files, File{Path: "/echo-basic", Src: binary, Mode: 0o755})
	return Spec{Name: ConformanceEchoName, Files: files, Entrypoint: []string{"/echo-basic"}, User: ConformanceEchoUser}, nil
}

// ConformanceEchoAdvancedName is the repository name (without hub) of the
// MESH profiles' backend: the suite's mesh manifests name
// registry.k8s.io/gateway-api/echo-advanced, Istio's echo application,
// whose server is the container's entrypoint and whose client the suite
// runs in the pod (`client URL …`, by exec) to send the mesh's requests.
const ConformanceEchoAdvancedName = "gateway-echo-advanced"

// EchoAdvancedFiles are the inputs of the echo-advanced image: static
// builds of istio.io/istio/pkg/test/echo/cmd/server and …/cmd/client
// (hack/istio-build.sh), and the TLS pair its manifests' --crt and --key
// name (/cert.crt, /cert.key).
type EchoAdvancedFiles struct {
	Server, Client string
	Cert, Key      string
}

// ConformanceEchoAdvancedSpec returns the image of the MESH profiles'
// backend laid out as Istio's echo image is: /usr/local/bin/server as the
// entrypoint, /usr/local/bin/client (on the image's PATH: the suite execs
// `client` by name), /cert.crt and /cert.key, run as root
// (the mesh's sidecar injection needs an application user other than the
// proxy's 1337; Istio's image has none either). scratch is a directory for
// generated files; it must outlive Build.
func ConformanceEchoAdvancedSpec(in EchoAdvancedFiles, scratch string) (Spec, error) {
	for _, f := range []struct{ what, path string }{
		{"echo server", in.Server}, {"echo client", in.Client}, {"certificate", in.Cert}, {"key", in.Key},
	} {
		if _, err := os.Stat(f.path); err != nil {
			return Spec{}, fmt.Errorf("echo-advanced %s: %w (the echo binaries: hack/istio-build.sh istio-echo-server istio.io/istio/pkg/test/echo/cmd/server, and the same for cmd/client)", f.what, err)
		}
	}
	files, err := baseFiles(scratch)
	if err != nil {
		return Spec{}, err
	}
	files = append(files,
		File{Path: "/usr/local/bin/server", Src: in.Server, Mode: 0o755},
		File{Path: "/usr/local/bin/client", Src: in.Client, Mode: 0o755},
		File{Path: "/cert.crt", Src: in.Cert, Mode: 0o644},
		File{Path: "/cert.key", Src: in.Key, Mode: 0o644},
	)
	return Spec{
		Name:       ConformanceEchoAdvancedName,
		Files:      files,
		Entrypoint: []string{"/usr/local/bin/server"},
	}, nil
}
