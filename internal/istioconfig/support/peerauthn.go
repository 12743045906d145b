package support

// peerAuthenticationSupport is the honour-or-refuse table of
// PeerAuthentication (see fieldSupport): straitd resolves the policy of
// each workload as Istio does (workload selector over namespace over the
// root namespace, UNSET inherits, the oldest wins among equals) and
// builds the inbound filter chains of its mode, per port where
// portLevelMtls says so; client sidecars send plaintext to a service whose
// namespace (or the mesh) is DISABLE.
var peerAuthenticationSupport = map[string]Support{
	"selector":                      Honoured,
	"selector.matchLabels":          Honoured,
	"mtls":                          Honoured,
	"mtls.mode":                     Honoured,
	"mtls.mode=DISABLE":             Honoured,
	"mtls.mode=PERMISSIVE":          Honoured,
	"mtls.mode=STRICT":              Honoured,
	"portLevelMtls":                 Honoured,
	"portLevelMtls.mode":            Honoured,
	"portLevelMtls.mode=DISABLE":    Honoured,
	"portLevelMtls.mode=PERMISSIVE": Honoured,
	"portLevelMtls.mode=STRICT":     Honoured,
}
