package gen

import (
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/straitmesh/strait/internal/meshconfig"
)

// pathNormalization is the mesh config's pathNormalization.normalization,
// which every HTTP connection manager of a sidecar (inbound and outbound)
// carries, as Istio's httpConnectionManager builder sets it
// (pilot/pkg/networking/core/listener_builder.go, "Setup normalization"):
// escaped slashes are kept unless DECODE_AND_MERGE_SLASHES decodes them;
// dot segments are removed unless NONE; MERGE_SLASHES and
// DECODE_AND_MERGE_SLASHES merge slashes. The authorization policies'
// paths match the path so normalized, which is the path the
// application receives.
type pathNormalization meshv1alpha1.MeshConfig_ProxyPathNormalization_NormalizationType

// meshPathNormalization is the mesh config's setting; nil is Istio's
// default (BASE).
func meshPathNormalization(c *meshconfig.Config) pathNormalization {
	if c == nil {
		return pathNormalization(meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE)
	}
	return pathNormalization(c.PathNormalization)
}

// apply sets the three HCM fields.
func (n pathNormalization) apply(m *hcm.HttpConnectionManager) {
	m.PathWithEscapedSlashesAction = hcm.HttpConnectionManager_KEEP_UNCHANGED
	switch meshv1alpha1.MeshConfig_ProxyPathNormalization_NormalizationType(n) {
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE:
		m.NormalizePath = wrapperspb.Bool(false)
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_MERGE_SLASHES:
		m.NormalizePath = wrapperspb.Bool(true)
		m.MergeSlashes = true
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES:
		m.NormalizePath = wrapperspb.Bool(true)
		m.MergeSlashes = true
		m.PathWithEscapedSlashesAction = hcm.HttpConnectionManager_UNESCAPE_AND_FORWARD
	default: // BASE; meshconfig never leaves DEFAULT
		m.NormalizePath = wrapperspb.Bool(true)
	}
}
