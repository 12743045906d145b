package main

import (
	"errors"
	"log/slog"
	"net/http"
	"net/netip"

	caserver "github.com/straitmesh/strait/internal/ca/server"
)

// openMonitoringPaths are served on the monitoring port to anyone:
// Prometheus scrapes and the readiness probe come from other hosts and
// carry no credentials. Everything else there (/debug/*, pprof, and any
// path added later) is guarded by debugGuard.
var openMonitoringPaths = map[string]bool{
	"/metrics":       true,
	"/healthz/ready": true,
}

// debugGuard serves the monitoring port's debug pages (the proxies' config
// and sync state, pprof) only to callers on loopback — straitd's own host
// or pod, where `kubectl port-forward` also arrives — or to callers with a
// bearer token of the control plane's namespace, as istiod's
// allowAuthenticatedOrLocalhost and AuthorizeDebugRequest
// (pilot/pkg/xds/debug.go) do. A valid token of another namespace is
// refused with 403: Istio would show such a caller its own namespace's
// proxies only, which Strait does not implement.
type debugGuard struct {
	// Set at creation, read-only.
	next http.Handler
	// authn checks tokens (the CA's authenticators); empty: only loopback
	// callers are served.
	authn []caserver.Authenticator
	// namespace is the control plane's namespace (--namespace).
	namespace string
	log       *slog.Logger
}

func (g *debugGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if openMonitoringPaths[r.URL.Path] || fromLoopback(r) {
		g.next.ServeHTTP(w, r)
		return
	}
	// The peer is another host (or another pod): it must authenticate.
	// Like istiod, the reason goes to the log, not to the caller.
	log := g.log.With("client", r.RemoteAddr, "path", r.URL.Path)
	caller, err := caserver.AuthenticateBearer(r.Context(), g.authn, r.Header.Values("Authorization"))
	if err != nil {
		if !errors.Is(err, caserver.ErrNoToken) {
			log.Warn("debug request refused", "error", err)
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="straitd debug"`)
		http.Error(w, "unauthorized: the debug endpoints need a loopback connection or a bearer token (a service-account token of "+g.namespace+" for audience istio-ca, or straitctl token create --namespace "+g.namespace+")", http.StatusUnauthorized)
		return
	}
	if caller.Namespace != g.namespace {
		log.Warn("debug request refused: the token is not of the control plane's namespace",
			"caller", caller.Namespace+"/"+caller.ServiceAccount, "namespace", g.namespace)
		http.Error(w, "forbidden: the debug endpoints are for identities of the control plane's namespace "+g.namespace, http.StatusForbidden)
		return
	}
	g.next.ServeHTTP(w, r)
}

// fromLoopback reports whether the request's peer, the address of the
// TCP connection (never a header such as X-Forwarded-For), is a loopback
// address, IPv4-mapped IPv6 included.
func fromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

var _ http.Handler = (*debugGuard)(nil)
