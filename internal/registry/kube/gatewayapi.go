package kube

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/registry/kube/gatewayapi"
)

// The Gateway API in Kubernetes mode (Options.GatewayAPI): on every
// rebuild the registry decodes the Gateway API objects of its informers'
// caches, translates them (package gatewayapi) into Istio Gateways and
// VirtualServices that join the store like any Istio config, and hands
// the statuses and the gateways to deploy to the leader's writers
// (WriteStatus: statuswriter.go, gatewaydeploy.go).

// decodedObject caches the typed form of one Gateway API object version.
type decodedObject struct {
	resourceVersion string
	obj             any
}

// gatewayAPIKind is a Gateway API kind the translation reads, with a
// new typed object to decode it into.
type gatewayAPIKind struct {
	kind string
	new  func() any
}

var translatedGatewayAPIKinds = []gatewayAPIKind{
	{"GatewayClass", func() any { return &gwv1.GatewayClass{} }},
	{"Gateway", func() any { return &gwv1.Gateway{} }},
	{"HTTPRoute", func() any { return &gwv1.HTTPRoute{} }},
	{"GRPCRoute", func() any { return &gwv1.GRPCRoute{} }},
	{"TLSRoute", func() any { return &gwv1.TLSRoute{} }},
	{"TCPRoute", func() any { return &gwv1.TCPRoute{} }},
	{"ReferenceGrant", func() any { return &gwv1beta1.ReferenceGrant{} }},
}

// translateGatewayAPI translates the Gateway API objects into configs
// (added with add) and records their statuses and the deployments. It
// runs on the worker, from buildStore.
func (r *Registry) translateGatewayAPI(add func(*istioconfig.Config)) {
	if !r.opts.GatewayAPI {
		return
	}
	in := gatewayapi.Input{
		Domain: r.opts.Domain,
		ServiceExists: func(ns, name string) bool {
			_, ok, _ := r.services.GetIndexer().GetByKey(ns + "/" + name)
			return ok
		},
		NamespaceLabels: func(ns string) map[string]string {
			obj, ok, _ := r.namespaces.GetIndexer().GetByKey(ns)
			if !ok {
				return nil
			}
			l := obj.(*corev1.Namespace).Labels
			if l == nil {
				l = map[string]string{}
			}
			return l
		},
		DeployedService: r.deployedService,
		Certificate: func(ns, name string) error {
			_, _, err := secretStore{r.secretsStore()}.keyAndCert(ns, name)
			return err
		},
	}
	seen := map[types.UID]bool{}
	uids := map[gatewayapi.Ref]types.UID{}
	generations := map[gatewayapi.Ref]int64{}
	for _, k := range translatedGatewayAPIKinds {
		w := r.kinds[GatewayAPIGroup+"/"+k.kind]
		if w == nil || !w.installed || !w.synced {
			continue
		}
		for _, o := range w.informer.GetStore().List() {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			seen[u.GetUID()] = true
			d, ok := r.gwDecoded[u.GetUID()]
			if !ok || d.resourceVersion != u.GetResourceVersion() {
				obj := k.new()
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
					r.log.Error("cannot decode Gateway API object; ignored", "kind", k.kind, "name", u.GetNamespace()+"/"+u.GetName(), "error", err)
					continue
				}
				d = decodedObject{resourceVersion: u.GetResourceVersion(), obj: obj}
				r.gwDecoded[u.GetUID()] = d
			}
			ref := gatewayapi.Ref{Kind: k.kind, Namespace: u.GetNamespace(), Name: u.GetName()}
			uids[ref], generations[ref] = u.GetUID(), u.GetGeneration()
			switch obj := d.obj.(type) {
			case *gwv1.GatewayClass:
				in.GatewayClasses = append(in.GatewayClasses, obj)
			case *gwv1.Gateway:
				in.Gateways = append(in.Gateways, obj)
			case *gwv1.HTTPRoute:
				in.HTTPRoutes = append(in.HTTPRoutes, obj)
			case *gwv1.GRPCRoute:
				in.GRPCRoutes = append(in.GRPCRoutes, obj)
			case *gwv1.TLSRoute:
				in.TLSRoutes = append(in.TLSRoutes, obj)
			case *gwv1.TCPRoute:
				in.TCPRoutes = append(in.TCPRoutes, obj)
			case *gwv1beta1.ReferenceGrant:
				in.ReferenceGrants = append(in.ReferenceGrants, obj)
			}
		}
	}
	for uid := range r.gwDecoded {
		if !seen[uid] {
			delete(r.gwDecoded, uid)
		}
	}
	out := gatewayapi.Translate(in)
	r.gwSecrets = out.Secrets
	for _, err := range out.Dropped {
		r.log.Error("routes of the Gateway API not served: their VirtualService fails validation", "error", err)
	}
	var keys []string
	for _, c := range out.Configs {
		add(c)
		keys = append(keys, string(c.Kind)+" "+c.Namespace+"/"+c.Name)
	}
	if !slices.Equal(keys, r.gwConfigs) {
		// What the Gateway API objects became, for a gateway that does
		// not answer as its routes say.
		r.log.Info("translated the Gateway API objects", "gateways", len(in.Gateways), "routes", len(in.HTTPRoutes)+len(in.GRPCRoutes)+len(in.TLSRoutes)+len(in.TCPRoutes), "configs", keys)
		r.gwConfigs = keys
	}
	// The statuses the leader writes.
	wanted := map[objectRef]wantedStatus{}
	put := func(ref gatewayapi.Ref, status any) {
		w := r.kinds[GatewayAPIGroup+"/"+ref.Kind]
		if w == nil {
			return
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
		if err != nil {
			r.log.Error("cannot render Gateway API status", "object", ref.String(), "error", err)
			return
		}
		wanted[objectRef{gvr: w.gvr, namespace: ref.Namespace, name: ref.Name}] = wantedStatus{
			uid: uids[ref], generation: generations[ref], gatewayAPI: pruneEmpty(m).(map[string]any), kind: ref.Kind,
		}
	}
	for ref, st := range out.GatewayClasses {
		put(ref, &st)
	}
	for ref, st := range out.Gateways {
		put(ref, &st)
	}
	for ref, st := range out.Routes {
		put(ref, &st)
	}
	for ref, w := range r.gwStatus {
		if _, ok := wanted[ref]; !ok {
			r.status.forget(ref, w.uid)
		}
	}
	r.gwStatus = wanted
	r.deployer.set(out.Deployments)
}

// deployedService is what a Gateway's status reads of the Service
// deployed for it.
func (r *Registry) deployedService(ns, name string) *gatewayapi.ServiceInfo {
	obj, ok, _ := r.services.GetIndexer().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	svc := obj.(*corev1.Service)
	info := &gatewayapi.ServiceInfo{Type: string(svc.Spec.Type), Hostname: fmt.Sprintf("%s.%s.svc.%s", name, ns, r.opts.Domain)}
	if info.Type == "" {
		info.Type = string(corev1.ServiceTypeClusterIP)
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		switch {
		case ing.IP != "":
			info.Ingress = append(info.Ingress, ing.IP)
		case ing.Hostname != "":
			info.Ingress = append(info.Ingress, ing.Hostname)
		}
	}
	return info
}

// isGatewayService reports a Service deployed for a Gateway: its status
// (the load balancer's address) is the Gateway's.
func isGatewayService(svc *corev1.Service) bool {
	return svc.Labels[gatewayapi.GatewayNameLabel] != ""
}

// pruneEmpty drops nil values and empty maps and slices, so that a status
// rendered from the Go types compares equal to the one the API server
// returns (which leaves them out).
func pruneEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			e = pruneEmpty(e)
			if isEmpty(e) {
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			out = append(out, pruneEmpty(e))
		}
		return out
	}
	return v
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}
