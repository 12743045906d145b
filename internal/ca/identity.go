package ca

import (
	"fmt"
	"net/url"
	"strings"
)

// Identity is a workload's SPIFFE identity as Istio spells it:
// spiffe://<trust domain>/ns/<namespace>/sa/<service account>.
type Identity struct {
	TrustDomain    string
	Namespace      string
	ServiceAccount string
}

// String is the SPIFFE ID, the only SAN of a workload certificate.
func (id Identity) String() string {
	return "spiffe://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// URL is the SPIFFE ID as a URL, for x509 templates.
func (id Identity) URL() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.TrustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}
}

// Validate reports an empty or malformed part, naming it.
func (id Identity) Validate() error {
	for _, p := range []struct{ name, v string }{
		{"trust domain", id.TrustDomain}, {"namespace", id.Namespace}, {"service account", id.ServiceAccount},
	} {
		if p.v == "" {
			return fmt.Errorf("identity: %s is empty", p.name)
		}
		if strings.ContainsAny(p.v, "/?#:@ \t\n") {
			return fmt.Errorf("identity: %s %q contains a character a SPIFFE ID cannot carry (one of / ? # : @ or a space)", p.name, p.v)
		}
	}
	return nil
}

// ParseIdentity parses spiffe://TD/ns/NS/sa/SA.
func ParseIdentity(s string) (Identity, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Identity{}, fmt.Errorf("SPIFFE ID %q: %w", s, err)
	}
	return identityFromURL(u)
}

func identityFromURL(u *url.URL) (Identity, error) {
	if u.Scheme != "spiffe" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return Identity{}, fmt.Errorf("SPIFFE ID %q: want spiffe://<trust domain>/ns/<namespace>/sa/<service account>", u.String())
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) != 4 || parts[0] != "ns" || parts[2] != "sa" {
		return Identity{}, fmt.Errorf("SPIFFE ID %q: path %q is not /ns/<namespace>/sa/<service account>", u.String(), u.Path)
	}
	id := Identity{TrustDomain: u.Host, Namespace: parts[1], ServiceAccount: parts[3]}
	if err := id.Validate(); err != nil {
		return Identity{}, fmt.Errorf("SPIFFE ID %q: %w", u.String(), err)
	}
	return id, nil
}
