package validate

import (
	"fmt"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// This file checks a DestinationRule: subsets and client TLS (its traffic
// policies are validateTrafficPolicies's).

func validateDestinationRule(el *fielderr.List, namespace string, s *networking.DestinationRule) {
	validateHost(el, "spec.host", s.Host)
	names := map[string]int{}
	for i, ss := range s.Subsets {
		f := fmt.Sprintf("spec.subsets[%d]", i)
		if ss == nil {
			el.Add(f, "must not be null")
			continue
		}
		switch {
		case ss.Name == "":
			el.Add(f+".name", "must be set")
		case len(ss.Name) > 63 || !dns1123Label.MatchString(ss.Name):
			el.Add(f+".name", "%q is not a valid subset name (a DNS label: lower-case letters, digits and '-')", ss.Name)
		default:
			if j, dup := names[ss.Name]; dup {
				el.Add(f+".name", "%q is already used by spec.subsets[%d]", ss.Name, j)
			}
			names[ss.Name] = i
		}
		validateLabels(el, f+".labels", ss.Labels)
		validateTrafficPolicyTLS(el, f+".trafficPolicy", ss.TrafficPolicy)
	}
	validateTrafficPolicyTLS(el, "spec.trafficPolicy", s.TrafficPolicy)
	validateLocalityLbSettings(el, s)
	validateTrafficPolicies(el, s)
	validateExportTo(el, namespace, s.ExportTo, false)
}

// validateTrafficPolicyTLS checks the tls and http2KeepAlive of a traffic policy and of its
// port-level settings.
func validateTrafficPolicyTLS(el *fielderr.List, f string, tp *networking.TrafficPolicy) {
	if tp == nil {
		return
	}
	validateClientTLS(el, f+".tls", tp.Tls)
	validateHTTP2KeepAlive(el, f+".connectionPool.http.http2KeepAlive", tp.GetConnectionPool().GetHttp().GetHttp2KeepAlive())
	for i, pl := range tp.PortLevelSettings {
		if pl != nil {
			pf := fmt.Sprintf("%s.portLevelSettings[%d]", f, i)
			validateClientTLS(el, pf+".tls", pl.Tls)
			validateHTTP2KeepAlive(el, pf+".connectionPool.http.http2KeepAlive", pl.GetConnectionPool().GetHttp().GetHttp2KeepAlive())
		}
	}
}

// validateHTTP2KeepAlive applies Istio's rule (pkg/config/validation
// validateConnectionPool): both interval and timeout are required.
func validateHTTP2KeepAlive(el *fielderr.List, f string, ka *networking.ConnectionPoolSettings_HTTPSettings_ConnectionKeepalive) {
	if ka == nil {
		return
	}
	if ka.Interval == nil {
		el.Add(f+".interval", "is required (how often to send an HTTP/2 PING, e.g. 30s)")
	}
	if ka.Timeout == nil {
		el.Add(f+".timeout", "is required (how long to wait for the PING's ACK, e.g. 5s)")
	}
}

// validateClientTLS applies Istio's rules for a DestinationRule's tls
// (pkg/config/validation/agent validateTLS): MUTUAL needs a certificate
// and a key; with insecureSkipVerify no CA and no SANs. The file paths
// become SDS resource names "file-cert:CERT~KEY" and "file-root:CA", so
// they may not contain "~".
func validateClientTLS(el *fielderr.List, f string, t *networking.ClientTLSSettings) {
	if t == nil {
		return
	}
	for _, p := range []struct{ name, value string }{
		{"clientCertificate", t.ClientCertificate}, {"privateKey", t.PrivateKey}, {"caCertificates", t.CaCertificates},
	} {
		if strings.Contains(p.value, "~") {
			el.Add(f+"."+p.name, "%q contains \"~\", which separates certificate and key in the SDS resource name; use a path without it", p.value)
		}
	}
	if t.GetInsecureSkipVerify().GetValue() && (t.Mode == networking.ClientTLSSettings_SIMPLE || t.Mode == networking.ClientTLSSettings_MUTUAL) {
		if t.CaCertificates != "" {
			el.Add(f+".caCertificates", "cannot be set when insecureSkipVerify is true (remove one of them)")
		}
		if len(t.SubjectAltNames) > 0 {
			el.Add(f+".subjectAltNames", "cannot be set when insecureSkipVerify is true (remove one of them)")
		}
	}
	if t.Mode == networking.ClientTLSSettings_MUTUAL && t.CredentialName == "" {
		if t.ClientCertificate == "" {
			el.Add(f+".clientCertificate", "is required for mode MUTUAL (the path of the client certificate on the sidecar's host)")
		}
		if t.PrivateKey == "" {
			el.Add(f+".privateKey", "is required for mode MUTUAL (the path of the client key on the sidecar's host)")
		}
	}
	if t.Mode == networking.ClientTLSSettings_SIMPLE && (t.ClientCertificate != "" || t.PrivateKey != "") {
		el.Add(f+".mode", "SIMPLE sends no client certificate: use MUTUAL with clientCertificate and privateKey, or remove them")
	}
}
