package mesh

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// Gateway credentials: a server that terminates TLS with a
// tls.credentialName is served only while its credential can be: when the
// Secret is missing or malformed, Istio serves no filter chain for it (the
// client's handshake fails at once instead of waiting for a secret that
// never comes), reports it (istiod's log; the IST0161
// InvalidGatewayCredential analysis), and the other servers keep working.
// The snapshot checks each credential that a Gateway of a gateway
// workload names, in the workload's namespace (where Istio looks for the
// Secret), once per build; the generator leaves out the chains whose
// credential failed (xds/gen gateway.go), and a registry rechecks them
// (CredentialsChanged) to learn of a credential that appeared, was fixed
// or broke.

// Credentials checks Gateway credentials; a registry that can read them
// implements it (the file registry: CONFIG_DIR/credentials).
type Credentials interface {
	// Check returns why the credential name of namespace ns cannot be
	// served (nil when it can): missing, a certificate and key that do
	// not parse or do not match, or, when mutual, no CA certificates.
	Check(ns, name string, mutual bool) error
}

// ControlPlaneCredentials is implemented by a Credentials whose registry
// also serves the credentials to the gateways itself, as istiod does in
// Kubernetes (pilot/pkg/xds/sds.go SecretGen): the gateway's proxy then
// asks the control plane for them over ADS (sds_config {ads: {}}) instead
// of its agent's SDS socket.
type ControlPlaneCredentials interface {
	Credentials
	// ServedOverADS marks the implementation; it is never called.
	ServedOverADS()
}

// credentialKey names one credential as a gateway workload asks for it.
type credentialKey struct {
	namespace, name string
	mutual          bool
}

func (k credentialKey) String() string { return k.namespace + "/" + k.name }

// gatewayCredentials are the results of one build's checks.
// Read-only once built.
type gatewayCredentials struct {
	checker Credentials // nil: nothing is checked
	errs    map[credentialKey]error
}

// credentialKeyOf is the key of the credential a server names for a
// router of namespace ns; ok is false for a server that names none or
// does not terminate TLS.
func credentialKeyOf(ns string, srv *networking.Server) (credentialKey, bool) {
	t := srv.GetTls()
	if t.GetCredentialName() == "" {
		return credentialKey{}, false
	}
	switch t.GetMode() {
	case networking.ServerTLSSettings_SIMPLE:
		return credentialKey{ns, t.GetCredentialName(), false}, true
	case networking.ServerTLSSettings_MUTUAL:
		return credentialKey{ns, t.GetCredentialName(), true}, true
	}
	return credentialKey{}, false
}

// checkGatewayCredentials checks the credentials that the Gateways of
// each gateway workload (one that a Gateway with a selector selects)
// name, and returns a problem for each server whose credential fails.
func checkGatewayCredentials(s *Snapshot, workloads []*Workload, checker Credentials) (gatewayCredentials, []error) {
	out := gatewayCredentials{checker: checker, errs: map[credentialKey]error{}}
	if checker == nil {
		return out, nil
	}
	gws := s.Configs.List(istioconfig.KindGateway)
	if len(gws) == 0 {
		return out, nil
	}
	type report struct {
		key    credentialKey
		server GatewayServer
	}
	var reports []report
	seen := map[string]bool{}
	for _, w := range workloads {
		if !selectedByGateway(gws, w.Labels) {
			continue
		}
		_, byPort, _ := s.GatewayServers(w.Labels)
		for _, servers := range byPort {
			for _, gs := range servers {
				key, ok := credentialKeyOf(w.Namespace, gs.Server)
				if !ok {
					continue
				}
				if _, done := out.errs[key]; !done {
					out.errs[key] = checker.Check(key.namespace, key.name, key.mutual)
				}
				id := fmt.Sprintf("%s#%d@%s", gs.Name(), gs.Index, w.Namespace)
				if out.errs[key] != nil && !seen[id] {
					seen[id] = true
					reports = append(reports, report{key, gs})
				}
			}
		}
	}
	slices.SortFunc(reports, func(a, b report) int {
		return cmp.Or(cmp.Compare(a.server.Name(), b.server.Name()), cmp.Compare(a.server.Index, b.server.Index), cmp.Compare(a.key.String(), b.key.String()))
	})
	var problems []error
	for _, r := range reports {
		src := r.server.Gateway.Source
		problems = append(problems, &istioconfig.FieldError{File: src.File, Document: src.Document,
			Field: fmt.Sprintf("spec.servers[%d].tls.credentialName", r.server.Index),
			Problem: fmt.Sprintf("credential %s of Gateway %s cannot be served: %v; the server (port %d) is left out until the credential is fixed, the other servers keep working",
				r.key, r.server.Name(), out.errs[r.key], r.server.Server.GetPort().GetNumber())})
	}
	return out, problems
}

// selectedByGateway reports whether a Gateway with a selector selects
// labels (a gateway workload; a selector-less Gateway, which Istio
// applies to every gateway, makes no workload a gateway by itself).
func selectedByGateway(gws []*istioconfig.Config, labels map[string]string) bool {
	for _, gw := range gws {
		if sel := gw.Gateway().GetSelector(); len(sel) > 0 && labelsMatch(sel, labels) {
			return true
		}
	}
	return false
}

// GatewayCredentialError is why a router of namespace ns cannot serve
// the credentialName of srv (nil when it can, when srv names none, or
// when this snapshot's registry does not check credentials).
func (s *Snapshot) GatewayCredentialError(ns string, srv *networking.Server) error {
	key, ok := credentialKeyOf(ns, srv)
	if !ok || s.credentials.checker == nil {
		return nil
	}
	if err, done := s.credentials.errs[key]; done {
		return err
	}
	// A router that is no WorkloadEntry of this snapshot.
	return s.credentials.checker.Check(key.namespace, key.name, key.mutual)
}

// GatewayCredentialsOverADS reports whether the gateways get their
// credentials from the control plane over ADS (a ControlPlaneCredentials
// registry, Kubernetes mode) rather than from their agent's SDS (file
// mode's CREDENTIALS_DIR).
func (s *Snapshot) GatewayCredentialsOverADS() bool {
	_, ok := s.credentials.checker.(ControlPlaneCredentials)
	return ok
}

// CredentialsChanged reports whether a credential this snapshot checked
// would now check otherwise (it appeared, was fixed, or broke): the
// registry then builds a new snapshot.
func (s *Snapshot) CredentialsChanged() bool {
	c := s.credentials
	if c.checker == nil {
		return false
	}
	for key, was := range c.errs {
		now := c.checker.Check(key.namespace, key.name, key.mutual)
		if (was == nil) != (now == nil) || (was != nil && was.Error() != now.Error()) {
			return true
		}
	}
	return false
}

// CheckPEMCertificates checks that b holds PEM certificates and nothing
// else (a credential's CA certificates, as the registries that implement
// Credentials read them).
func CheckPEMCertificates(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %q, want CERTIFICATE", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate")
	}
	return nil
}
