package kube

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/kube/gatewayapi"
)

// Secrets: straitd watches the cluster's Secrets, as istiod's
// credentials controller does (pilot/pkg/credentials/kube secrets.go),
// leaving out the two types no gateway reads and that are the most
// numerous (service account tokens and Helm releases). It checks the
// Gateways' credentials with them (mesh.Credentials: a server whose
// Secret is missing or malformed gets no filter chain) and serves them
// to the gateways over ADS as Istio's SecretGen does
// (pilot/pkg/xds/sds.go): the SDS resource kubernetes://NAME (a
// tls_certificate) and kubernetes://NAME-cacert (a validation_context),
// NAME a Secret of the gateway's own namespace.

// KindSecret is the config kind of a Secret in a push request.
const KindSecret proxypush.Kind = "Secret"

// credentialResourcePrefix is the prefix of Istio's Kubernetes credential
// resource names (pilot/pkg/model/credentials KubernetesSecretTypeURI).
const credentialResourcePrefix = "kubernetes://"

// secretFieldSelector keeps the Secrets a gateway may name (Istio's
// credentials controller selector).
func secretFieldSelector() fields.Selector {
	return fields.AndSelectors(
		fields.OneTermNotEqualSelector("type", "helm.sh/release.v1"),
		fields.OneTermNotEqualSelector("type", string(corev1.SecretTypeServiceAccountToken)),
	)
}

// secretStore reads the Secrets the registry's informer caches; safe for
// concurrent use (the informer's store is).
type secretStore struct{ store cache.Store }

func (c secretStore) get(ns, name string) *corev1.Secret {
	if c.store == nil {
		return nil
	}
	obj, ok, _ := c.store.GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	s, _ := obj.(*corev1.Secret)
	return s
}

// Check implements mesh.Credentials. A Gateway API Gateway's
// certificate of another namespace is named
// kubernetes-gateway://NAMESPACE/NAME (gatewayapi.CrossNamespaceCredential):
// the Secret NAMESPACE/NAME.
func (c secretStore) Check(ns, name string, mutual bool) error {
	if rest, ok := strings.CutPrefix(name, gatewayapi.CrossNamespaceCredentialPrefix); ok {
		refNS, refName, found := strings.Cut(rest, "/")
		if !found || refNS == "" || refName == "" {
			return fmt.Errorf("credential %q: want %sNAMESPACE/NAME", name, gatewayapi.CrossNamespaceCredentialPrefix)
		}
		ns, name = refNS, refName
	}
	if _, _, err := c.keyAndCert(ns, name); err != nil {
		return err
	}
	if mutual {
		if _, _, err := c.caCerts(ns, name); err != nil {
			return err
		}
	}
	return nil
}

// ServedOverADS implements mesh.ControlPlaneCredentials.
func (secretStore) ServedOverADS() {}

// keyAndCert is the certificate and key of the credential ns/name.
func (c secretStore) keyAndCert(ns, name string) (cert, key []byte, err error) {
	s := c.get(ns, name)
	if s == nil {
		return nil, nil, fmt.Errorf("secret %s/%s not found (create it with tls.crt and tls.key, or cert and key)", ns, name)
	}
	return keyAndCert(s)
}

// caCerts is the CA certificates and revocation list of the credential
// ns/name: those of a Secret NAME-cacert, else NAME's own (Istio's
// GetCaCert).
func (c secretStore) caCerts(ns, name string) (ca, crl []byte, err error) {
	if s := c.get(ns, name+caSuffix); s != nil {
		return caCerts(s)
	}
	s := c.get(ns, name)
	if s == nil {
		return nil, nil, fmt.Errorf("secret %s/%s not found, nor %s/%s%s with the CA certificates", ns, name, ns, name, caSuffix)
	}
	return caCerts(s)
}

var _ mesh.ControlPlaneCredentials = secretStore{}

// onSecret: a Secret that a Gateway's credentialName may name (NAME, or
// NAME-cacert), or that a Gateway API Gateway's certificateRefs name,
// changed → a full push naming it: the Gateway API translation looks the
// certificates up again (a listener whose Secret appeared or broke gains
// or loses its ResolvedRefs and its server), the snapshot checks the
// credentials again (a server whose Secret appeared or broke gains or
// loses its chain) and the gateways get the new value. A Secret that
// Gateways of other namespaces read (with a ReferenceGrant) is also
// named in each of those namespaces, by the name they read it by
// (kubernetes-gateway://NAMESPACE/NAME), so that SecretsOnly's push
// reaches their gateways.
func (r *Registry) onSecret(_ context.Context, ev event) *proxypush.PushRequest {
	s, ok := ev.obj.(*corev1.Secret)
	if !ok || sameVersion(ev) {
		return nil
	}
	readers := r.gwSecrets[s.Namespace+"/"+s.Name]
	if len(readers) == 0 && !r.credentialNamed(s.Name) && !r.credentialNamed(strings.TrimSuffix(s.Name, caSuffix)) {
		return nil
	}
	r.log.Debug("gateway credential changed", "event", ev.typ, "secret", s.Namespace+"/"+s.Name)
	keys := []proxypush.ConfigKey{{Kind: KindSecret, Namespace: s.Namespace, Name: s.Name}}
	for _, ns := range readers {
		if ns != s.Namespace {
			keys = append(keys, proxypush.ConfigKey{Kind: KindSecret, Namespace: ns, Name: gatewayapi.CrossNamespaceCredential(s.Namespace, s.Name)})
		}
	}
	return fullPush(proxypush.ConfigUpdate, keys...)
}

// credentialNamed reports whether a Gateway of the current snapshot
// names name as a credentialName (in any namespace: the Secret is looked
// for in the gateway workload's namespace, not the Gateway's).
func (r *Registry) credentialNamed(name string) bool {
	if name == "" {
		return false
	}
	for _, gw := range r.Snapshot().Configs.List(istioconfig.KindGateway) {
		for _, srv := range gw.Gateway().GetServers() {
			if srv.GetTls().GetCredentialName() == name {
				return true
			}
		}
	}
	return false
}

// SecretsOnly reports whether req names only Secrets (the push a Secret
// change makes), and their namespaces: it concerns only the gateways of
// those namespaces.
func SecretsOnly(req *proxypush.PushRequest) (namespaces map[string]bool, ok bool) {
	if req == nil || len(req.ConfigsUpdated) == 0 || len(req.ServicesUpdated) > 0 || len(req.AddressesUpdated) > 0 {
		return nil, false
	}
	namespaces = map[string]bool{}
	for k := range maps.Keys(req.ConfigsUpdated) {
		if k.Kind != KindSecret {
			return nil, false
		}
		namespaces[k.Namespace] = true
	}
	return namespaces, true
}

// GenerateSecrets builds the credentials proxy asked for (watched: SDS
// resource names kubernetes://NAME or kubernetes://NAMESPACE/NAME, and
// their -cacert CA resources). As Istio's SecretGen, only a gateway
// (router) gets any, and only the Secrets of its own namespace (the
// node's namespace, which ResolveProxy checked against its pod): a
// sidecar's request is refused with an error, a name of another
// namespace or of no Kubernetes Secret is left out and logged, as is a
// Secret that is missing or malformed, so that one bad reference does
// not hold up the others. Who may have them: secretauthz.go.
func (r *Registry) GenerateSecrets(proxy *proxypush.Proxy, watched []string) ([]*discovery.Resource, error) {
	return generateSecrets(secretStore{r.secretsStore()}, r.log, proxy, watched, r.authorizeSecrets, r.crossNamespaceCredential)
}

// crossNamespaceCredential reports whether an Istio Gateway of namespace
// ns names the credential resource (kubernetes-gateway://NAMESPACE/NAME)
// in the current snapshot. Only the Gateway API translation writes such
// a name (istioconfig refuses it in a Gateway written by hand), and only
// for a certificate that a ReferenceGrant lets the Gateways of ns read:
// Istio's VerifiedCertificateReferences.
func (r *Registry) crossNamespaceCredential(ns, resource string) bool {
	for _, gw := range r.Snapshot().Configs.List(istioconfig.KindGateway) {
		if gw.Namespace != ns {
			continue
		}
		for _, srv := range gw.Gateway().GetServers() {
			if srv.GetTls().GetCredentialName() == resource {
				return true
			}
		}
	}
	return false
}

// generateSecrets builds the credentials of watched for proxy once
// authorize (Registry.authorizeSecrets, secretauthz.go) let it have them;
// granted reports a certificate of another namespace that the proxy's
// namespace's Gateways may read (Registry.crossNamespaceCredential).
func generateSecrets(store secretStore, log *slog.Logger, proxy *proxypush.Proxy, watched []string,
	authorize func(*proxypush.Proxy) error, granted func(ns, resource string) bool,
) ([]*discovery.Resource, error) {
	if err := authorize(proxy); err != nil {
		return nil, err
	}
	var out []*discovery.Resource
	for _, name := range watched {
		ref, err := parseCredentialResource(name, proxy.Namespace, granted)
		if err != nil {
			log.Warn("credential refused", "proxy", proxy.ID, "resource", name, "error", err)
			continue
		}
		sec, err := ref.build(store)
		if err != nil {
			log.Warn("credential not served", "proxy", proxy.ID, "resource", name, "error", err)
			continue
		}
		a, err := anypb.New(sec)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", name, err)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(sec)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", name, err)
		}
		a.Value = b
		out = append(out, &discovery.Resource{Name: name, Resource: a})
	}
	return out, nil
}

// secretsStore is the informer's store; nil before New made it.
func (r *Registry) secretsStore() cache.Store {
	if r.secrets == nil {
		return nil
	}
	return r.secrets.GetStore()
}

// credentialRef is a parsed credential resource name.
type credentialRef struct {
	resource, namespace, name string
	ca                        bool // NAME-cacert: the CA certificates of NAME
}

// parseCredentialResource parses kubernetes://NAME (a Secret of ns, the
// proxy's namespace) or kubernetes://NAMESPACE/NAME, which must name ns
// too: a gateway reads only its own namespace's Secrets; or
// kubernetes-gateway://NAMESPACE/NAME, a Gateway API certificate, of ns
// or one that granted(ns, resource) allows (a ReferenceGrant, checked by
// the translation that wrote the name).
func parseCredentialResource(resource, ns string, granted func(ns, resource string) bool) (credentialRef, error) {
	if rest, ok := strings.CutPrefix(resource, gatewayapi.CrossNamespaceCredentialPrefix); ok {
		refNS, name, qualified := strings.Cut(rest, "/")
		if !qualified || refNS == "" || name == "" || strings.Contains(name, "/") {
			return credentialRef{}, fmt.Errorf("SDS resource %q: want %sNAMESPACE/NAME", resource, gatewayapi.CrossNamespaceCredentialPrefix)
		}
		if refNS != ns && (granted == nil || !granted(ns, resource)) {
			return credentialRef{}, fmt.Errorf("SDS resource %q: the Secret is in namespace %s, the gateway in %s, and no Gateway of %s that a ReferenceGrant lets read it names it", resource, refNS, ns, ns)
		}
		return newCredentialRef(resource, refNS, name), nil
	}
	rest, ok := strings.CutPrefix(resource, credentialResourcePrefix)
	if !ok {
		return credentialRef{}, fmt.Errorf("SDS resource %q is not a Kubernetes credential (want %sNAME)", resource, credentialResourcePrefix)
	}
	refNS, name, qualified := strings.Cut(rest, "/")
	if !qualified {
		refNS, name = ns, rest
	}
	if name == "" || refNS == "" || strings.Contains(name, "/") {
		return credentialRef{}, fmt.Errorf("SDS resource %q: want %sNAME or %sNAMESPACE/NAME", resource, credentialResourcePrefix, credentialResourcePrefix)
	}
	if refNS != ns {
		return credentialRef{}, fmt.Errorf("SDS resource %q: the Secret is in namespace %s, the gateway in %s; a gateway reads only the Secrets of its own namespace", resource, refNS, ns)
	}
	return newCredentialRef(resource, refNS, name), nil
}

// newCredentialRef is the reference to the Secret namespace/name, or to
// the CA certificates of namespace/BASE for a name BASE-cacert.
func newCredentialRef(resource, namespace, name string) credentialRef {
	ref := credentialRef{resource: resource, namespace: namespace, name: name}
	if base, isCA := strings.CutSuffix(name, caSuffix); isCA && base != "" {
		ref.name, ref.ca = base, true
	}
	return ref
}

// build reads the credential from store.
func (ref credentialRef) build(store secretStore) (*tlsv3.Secret, error) {
	inline := func(b []byte) *core.DataSource {
		return &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: b}}
	}
	if ref.ca {
		ca, crl, err := store.caCerts(ref.namespace, ref.name)
		if err != nil {
			return nil, err
		}
		vc := &tlsv3.CertificateValidationContext{TrustedCa: inline(ca)}
		if len(crl) > 0 {
			vc.Crl = inline(crl) // Istio's toEnvoyCaSecret
		}
		return &tlsv3.Secret{Name: ref.resource, Type: &tlsv3.Secret_ValidationContext{ValidationContext: vc}}, nil
	}
	cert, key, err := store.keyAndCert(ref.namespace, ref.name)
	if err != nil {
		return nil, err
	}
	return &tlsv3.Secret{Name: ref.resource, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(cert),
		PrivateKey:       inline(key),
	}}}, nil
}
