package main

import (
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/kube"
	"github.com/straitmesh/strait/internal/xds"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// credentialGenerator is the generator of Kubernetes mode: it serves the
// Secret type (the Gateways' credentials, kube.Registry.GenerateSecrets,
// as istiod's SecretGen does) beside the generator of every other type,
// and sends the push a Secret change makes only to the gateways of the
// Secret's namespace, the only proxies that may read it.
type credentialGenerator struct {
	*gen.Generator
	secrets *kube.Registry
}

// Generate implements xds.Generator.
func (g credentialGenerator) Generate(proxy *proxypush.Proxy, typeURL string, watched []string, req *proxypush.PushRequest) ([]*discovery.Resource, error) {
	if typeURL == xdsapi.SecretType {
		return g.secrets.GenerateSecrets(proxy, watched)
	}
	return g.Generator.Generate(proxy, typeURL, watched, req)
}

// NeedsPush implements xds.PushFilter.
func (g credentialGenerator) NeedsPush(proxy *proxypush.Proxy, req *proxypush.PushRequest) (*proxypush.PushRequest, bool) {
	if namespaces, ok := kube.SecretsOnly(req); ok {
		if proxy == nil || proxy.Type != proxypush.Router || !namespaces[proxy.Namespace] {
			return nil, false
		}
		return req, true
	}
	return g.Generator.NeedsPush(proxy, req)
}

var (
	_ xds.Generator         = credentialGenerator{}
	_ xds.PushFilter        = credentialGenerator{}
	_ xds.EndpointsNarrower = credentialGenerator{}
)
