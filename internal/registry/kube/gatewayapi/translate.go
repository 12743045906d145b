// Package gatewayapi translates the Kubernetes Gateway API
// (gateway.networking.k8s.io: GatewayClass, Gateway, HTTPRoute, GRPCRoute,
// TLSRoute, TCPRoute, ReferenceGrant) into the Istio kinds the service
// model is built from (an Istio Gateway per listener, a VirtualService per
// listener and hostname), and computes the status conditions Istio writes on them, as
// istiod's Gateway API controller does (pilot/pkg/config/kube/gateway:
// conversion.go, conditions.go): Istio's names, reasons and semantics, so
// that the xDS generators serve a Gateway API Gateway like any Istio
// Gateway.
//
// Translate is a pure function of its Input: the registry calls it on
// every rebuild with the objects of its informers' caches. Everything of
// the spec it does not implement is refused visibly: the listener or the
// route's parent gets a False condition whose message names the field,
// and the part refused is not served.
package gatewayapi

import (
	"cmp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// ControllerName is the controller of GatewayClasses whose Gateways
// straitd serves: Istio's, so that manifests written for Istio work.
const ControllerName gwv1.GatewayController = "istio.io/gateway-controller"

// DefaultClassName is the GatewayClass Istio installs for ControllerName.
const DefaultClassName = "istio"

// GatewayNameLabel is the label Istio puts on the pods it deploys for a
// Gateway; the translated Istio Gateways select them by it.
const GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// GatewayNamespaceLabel is the namespace of the Gateway whose pods
// straitd deploys, on those pods beside GatewayNameLabel. An Istio
// Gateway's selector selects pods of every namespace, so the translated
// Gateways select by both (PodSelector): the Gateways "web" of two
// namespaces each get their own pods, as Istio's, which binds a Gateway
// API Gateway to the pods of its Service in its namespace.
const GatewayNamespaceLabel = "gateway.strait.io/namespace"

// PodSelector is the selector of the pods deployed for the Gateway
// namespace/name (and their labels).
func PodSelector(namespace, name string) map[string]string {
	return map[string]string{GatewayNameLabel: name, GatewayNamespaceLabel: namespace}
}

// Group is the Gateway API group.
const Group = gwv1.GroupName

// ServiceTypeAnnotation sets the type of the Service deployed for a
// Gateway (Istio's networking.istio.io/service-type; default
// LoadBalancer).
const ServiceTypeAnnotation = "networking.istio.io/service-type"

// Input is what one translation reads: the Gateway API objects and the
// lookups into the rest of the cluster.
type Input struct {
	// Domain is the cluster DNS domain (cluster.local).
	Domain          string
	GatewayClasses  []*gwv1.GatewayClass
	Gateways        []*gwv1.Gateway
	HTTPRoutes      []*gwv1.HTTPRoute
	GRPCRoutes      []*gwv1.GRPCRoute
	TLSRoutes       []*gwv1.TLSRoute
	TCPRoutes       []*gwv1.TCPRoute
	ReferenceGrants []*gwv1beta1.ReferenceGrant
	// ServiceExists reports whether a Service namespace/name exists.
	ServiceExists func(namespace, name string) bool
	// NamespaceLabels returns a namespace's labels (for allowedRoutes
	// selectors); nil when it does not exist.
	NamespaceLabels func(namespace string) map[string]string
	// DeployedService returns the Service deployed for a Gateway
	// (DeploymentName), for the Gateway's status addresses.
	DeployedService func(namespace, name string) *ServiceInfo
	// Certificate returns why the Secret namespace/name is no
	// certificate a listener can serve (missing, or no certificate and
	// private key that parse and match, in Istio's Secret formats); nil
	// when it is one. Nil: every certificate is taken as valid.
	Certificate func(namespace, name string) error
}

// ServiceInfo is what a Gateway's status reads of its deployed Service.
type ServiceInfo struct {
	// Type is the Service type (ClusterIP, LoadBalancer, NodePort).
	Type string
	// Hostname is NAME.NAMESPACE.svc.DOMAIN.
	Hostname string
	// Ingress are the load balancer's addresses (IPs or hostnames).
	Ingress []string
}

// Ref names one Gateway API object.
type Ref struct {
	Kind, Namespace, Name string
}

func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// Output is the translation: the Istio configs to serve, the status each
// Gateway API object should have, and the Gateways to deploy.
type Output struct {
	Configs []*istioconfig.Config
	// GatewayClasses, Gateways and Routes are the statuses by object;
	// objects that are not ours have none.
	GatewayClasses map[Ref]gwv1.GatewayClassStatus
	Gateways       map[Ref]gwv1.GatewayStatus
	Routes         map[Ref]gwv1.RouteStatus
	// Deployments are the Gateways whose proxies straitd deploys.
	Deployments []Deployment
	// Secrets are the Secrets (namespace/name) that our Gateways'
	// certificateRefs name, each with the namespaces of those Gateways
	// (sorted): a change of one of them translates again, and concerns
	// the gateways of those namespaces.
	Secrets map[string][]string
	// Dropped are the VirtualServices that routes accepted one by one
	// combined into but that failed validation together: left out rather
	// than served in part, and named here so that straitd says so.
	Dropped []error
}

// Deployment is a Gateway for which straitd deploys a gateway proxy:
// Deployment, Service and ServiceAccount named DeploymentName(Gateway).
type Deployment struct {
	Gateway *gwv1.Gateway
	// Ports are the Service's ports.
	Ports []ServicePort
}

// ServicePort is one port of a deployed gateway's Service.
type ServicePort struct {
	Name        string
	Port        int32
	AppProtocol string
}

// StatusPort is the gateway proxy's health port (Istio's status-port).
const StatusPort = 15021

// DeploymentName is the name of the objects deployed for a Gateway
// (Istio's NAME-CLASS).
func DeploymentName(gateway, class string) string { return gateway + "-" + class }

// Translate translates in. The conditions have no lastTransitionTime:
// the status writer keeps the one on the object while a condition's
// status stays, and stamps the time of writing when it changes.
func Translate(in Input) Output {
	t := &translator{in: in, out: Output{
		GatewayClasses: map[Ref]gwv1.GatewayClassStatus{},
		Gateways:       map[Ref]gwv1.GatewayStatus{},
		Routes:         map[Ref]gwv1.RouteStatus{},
		Secrets:        map[string][]string{},
	}, meshRoutes: map[string]*meshVirtualService{}}
	if t.in.ServiceExists == nil {
		t.in.ServiceExists = func(string, string) bool { return false }
	}
	if t.in.NamespaceLabels == nil {
		t.in.NamespaceLabels = func(string) map[string]string { return nil }
	}
	if t.in.DeployedService == nil {
		t.in.DeployedService = func(string, string) *ServiceInfo { return nil }
	}
	if t.in.Certificate == nil {
		t.in.Certificate = func(string, string) error { return nil }
	}
	t.classes()
	t.translateGateways()
	t.httpRoutes()
	t.grpcRoutes()
	t.streamRoutes()
	t.finish()
	return t.out
}

type translator struct {
	in  Input
	out Output
	// ours are the GatewayClasses of ControllerName by name.
	ours map[string]bool
	// gateways are our Gateways by namespace/name.
	gateways map[string]*gateway
	// meshRoutes are the mesh VirtualServices being built, by merge key
	// (mesh.go).
	meshRoutes map[string]*meshVirtualService
	// meshConversion is set while a route's rules are translated for
	// its Service parents: backendRefs to other namespaces need no
	// ReferenceGrant then.
	meshConversion bool
}

// classes accepts the GatewayClasses of ControllerName.
func (t *translator) classes() {
	t.ours = map[string]bool{}
	for _, c := range t.in.GatewayClasses {
		if c.Spec.ControllerName != ControllerName {
			continue
		}
		cond := t.condition(c.Generation, string(gwv1.GatewayClassConditionStatusAccepted), true, string(gwv1.GatewayClassReasonAccepted), "Handled by Istio controller")
		if c.Spec.ParametersRef != nil {
			cond = t.condition(c.Generation, string(gwv1.GatewayClassConditionStatusAccepted), false, string(gwv1.GatewayClassReasonInvalidParameters),
				"spec.parametersRef: not supported by Strait yet")
		} else {
			// A class refused is not served: its Gateways are left alone
			// (no deployment, no config, no status of ours).
			t.ours[c.Name] = true
		}
		t.out.GatewayClasses[Ref{"GatewayClass", "", c.Name}] = gwv1.GatewayClassStatus{Conditions: []metav1.Condition{cond}}
	}
}

// condition is one status condition.
func (t *translator) condition(generation int64, typ string, ok bool, reason, message string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
}

// sortByAge orders objects as Istio does: oldest first, then by
// namespace and name.
func sortByAge[T metav1.Object](objs []T) []T {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b T) int {
		return cmp.Or(a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time),
			strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	return out
}
