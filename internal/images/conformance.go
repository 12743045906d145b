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
