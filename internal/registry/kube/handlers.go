package kube

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/locality"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// The per-kind handlers. Each runs on the worker goroutine and returns the
// push its event needs, or nil. Updates that change nothing the mesh reads
// (a relist after an API server outage, status-only writes) return nil, so
// that only real changes are pushed.

func fullPush(reason proxypush.TriggerReason, keys ...proxypush.ConfigKey) *proxypush.PushRequest {
	return &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{reason}, ConfigsUpdated: keySet(keys)}
}

func edsPush(keys ...proxypush.ConfigKey) *proxypush.PushRequest {
	return &proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}, ConfigsUpdated: keySet(keys)}
}

func keySet(keys []proxypush.ConfigKey) map[proxypush.ConfigKey]struct{} {
	if len(keys) == 0 {
		return nil
	}
	m := make(map[proxypush.ConfigKey]struct{}, len(keys))
	for _, k := range keys {
		m[k] = struct{}{}
	}
	return m
}

// sameVersion reports an update that is no change (informer relist).
func sameVersion(ev event) bool {
	if ev.typ != eventUpdate {
		return false
	}
	_, a := uidOf(ev.old)
	_, b := uidOf(ev.obj)
	return a != "" && a == b
}

// onService: a Service change → full push (clusters, listeners and routes
// depend on its ports and addresses).
func (r *Registry) onService(_ context.Context, ev event) *proxypush.PushRequest {
	svc, ok := ev.obj.(*corev1.Service)
	if !ok || sameVersion(ev) {
		return nil
	}
	if ev.typ == eventUpdate {
		old := ev.old.(*corev1.Service)
		if equality.Semantic.DeepEqual(old.Spec, svc.Spec) && maps.Equal(old.Labels, svc.Labels) &&
			old.Annotations[ExportToAnnotation] == svc.Annotations[ExportToAnnotation] {
			if r.opts.GatewayAPI && isGatewayService(svc) && !equality.Semantic.DeepEqual(old.Status, svc.Status) {
				// The load balancer's address is the Gateway's: a
				// rebuild recomputes its status (the store is the same,
				// so nothing is pushed).
				return fullPush(proxypush.ServiceUpdate, serviceKey(svc.Namespace, svc.Name))
			}
			return nil // status only (load balancer)
		}
	}
	r.log.Debug("service changed", "event", ev.typ, "service", svc.Namespace+"/"+svc.Name)
	return fullPush(proxypush.ServiceUpdate, serviceKey(svc.Namespace, svc.Name))
}

// onEndpointSlice: an EndpointSlice change → endpoints-only (EDS) push for
// its Service. The worker adds the addresses whose inbound side changed
// (registry.DiffServices), so that their proxies get a full push.
func (r *Registry) onEndpointSlice(_ context.Context, ev event) *proxypush.PushRequest {
	s, ok := ev.obj.(*discoveryv1.EndpointSlice)
	if !ok || sameVersion(ev) {
		return nil
	}
	if ev.typ == eventUpdate {
		old := ev.old.(*discoveryv1.EndpointSlice)
		if equality.Semantic.DeepEqual(old.Endpoints, s.Endpoints) && equality.Semantic.DeepEqual(old.Ports, s.Ports) &&
			old.Labels[serviceNameKey] == s.Labels[serviceNameKey] {
			return nil
		}
	}
	svc := s.Labels[serviceNameKey]
	r.log.Debug("endpoints changed", "event", ev.typ, "slice", s.Namespace+"/"+s.Name, "service", svc)
	return edsPush(serviceKey(s.Namespace, svc))
}

// onPod: a pod's labels changed → push for that pod's proxy: full, naming
// the pod's workload, whose address the worker puts in AddressesUpdated
// (the proxy's own config and subset membership depend on its labels). A
// pod appearing, going away or changing IP → endpoints-only push (pods are
// workloads that ServiceEntry selectors may pick).
func (r *Registry) onPod(_ context.Context, ev event) *proxypush.PushRequest {
	pod, ok := ev.obj.(*corev1.Pod)
	if !ok || sameVersion(ev) {
		return nil
	}
	key := podKey(pod.Namespace, pod.Name)
	switch ev.typ {
	case eventAdd, eventDelete:
		if pod.Status.PodIP == "" {
			return nil
		}
		return edsPush(key)
	}
	old := ev.old.(*corev1.Pod)
	if !maps.Equal(old.Labels, pod.Labels) {
		r.log.Debug("pod labels changed", "pod", pod.Namespace+"/"+pod.Name)
		return fullPush(proxypush.ProxyUpdate, key)
	}
	if old.Status.PodIP != pod.Status.PodIP || podFinished(old) != podFinished(pod) ||
		old.Spec.ServiceAccountName != pod.Spec.ServiceAccountName {
		return edsPush(key)
	}
	return nil
}

// onNode: a node's locality (its topology labels) is the locality of the
// pods on it that have none of their own; when it changes, every derived
// config is rebuilt and every proxy may see other priorities.
func (r *Registry) onNode(_ context.Context, ev event) *proxypush.PushRequest {
	n, ok := ev.obj.(*corev1.Node)
	if !ok || sameVersion(ev) {
		return nil
	}
	if old, ok := ev.old.(*corev1.Node); ok && ev.typ != eventDelete && nodeLocality(old) == nodeLocality(n) {
		return nil
	}
	if ev.typ == eventAdd && nodeLocality(n) == "" {
		return nil
	}
	r.derived.nodesGen++
	return &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ProxyUpdate}}
}

// nodeLocality is a node's locality from its topology labels
// (topology.kubernetes.io/region and zone, topology.istio.io/subzone, the
// failure-domain.beta names as fallbacks).
func nodeLocality(n *corev1.Node) string {
	return locality.FromNodeLabels(n.Labels)
}

// onNamespace: Namespaces are cached for lookups; their labels decide
// which Gateway API routes a listener allows (allowedRoutes selectors),
// so a label change rebuilds when the Gateway API is watched.
func (r *Registry) onNamespace(_ context.Context, ev event) *proxypush.PushRequest {
	if !r.opts.GatewayAPI || sameVersion(ev) {
		return nil
	}
	if o, ok := ev.old.(*corev1.Namespace); ok {
		if n, ok := ev.obj.(*corev1.Namespace); ok && maps.Equal(o.Labels, n.Labels) {
			return nil
		}
	}
	return fullPush(proxypush.ConfigUpdate)
}

// onMesh: the mesh config changed; every proxy may depend on it.
func (r *Registry) onMesh(_ context.Context, ev event) *proxypush.PushRequest {
	m, ok := ev.obj.(*meshconfig.Config)
	if !ok || m == nil {
		return nil
	}
	r.mesh = m
	return &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.GlobalUpdate}}
}

// onStatic: the static source (file registry) changed.
func (r *Registry) onStatic(_ context.Context, ev event) *proxypush.PushRequest {
	req, ok := ev.obj.(*proxypush.PushRequest)
	if !ok || req == nil {
		return nil
	}
	c := *req // the worker completes requests in place; the caller's stays as it was
	return &c
}

// onConfig returns the handler of a CRD-backed kind: any change to the
// object's metadata.generation (its spec) or labels → full push.
func (r *Registry) onConfig(group, kind string) handler {
	// The status writer writes the status of the kinds translated (the
	// Gateway API's included).
	translated := istioconfig.GroupOf(proxypush.Kind(kind)) == group || group == GatewayAPIGroup
	return func(_ context.Context, ev event) *proxypush.PushRequest {
		if sameVersion(ev) {
			return nil
		}
		m, err := meta.Accessor(ev.obj)
		if err != nil {
			return nil
		}
		if w := r.kinds[group+"/"+kind]; translated && w != nil && ev.typ != eventDelete {
			// The status writer compares the object's status with what it
			// wants (status-only updates included: someone else's write).
			r.status.changed(refOf(w.gvr, ev.obj))
		}
		if ev.typ == eventUpdate {
			// A Gateway API Gateway's annotations are read too (the
			// deployed Service's type).
			if o, err := meta.Accessor(ev.old); err == nil && o.GetGeneration() == m.GetGeneration() &&
				m.GetGeneration() != 0 && maps.Equal(o.GetLabels(), m.GetLabels()) &&
				(group != GatewayAPIGroup || maps.Equal(o.GetAnnotations(), m.GetAnnotations())) {
				return nil // status or annotations only
			}
		}
		r.log.Debug("config changed", "event", ev.typ, "kind", group+"/"+kind, "name", m.GetNamespace()+"/"+m.GetName())
		return fullPush(proxypush.ConfigUpdate, proxypush.ConfigKey{Kind: proxypush.Kind(kind), Name: m.GetName(), Namespace: m.GetNamespace()})
	}
}

// onCRD is steps (2) to (4) of kind discovery (see the package doc) for one CRD: keep it if its kind is
// of interest, find the informer for its group and version, register the
// callbacks and start it. The kind joins the snapshot when its informer has
// synced (onKindSynced). A deleted CRD's objects leave the snapshot.
func (r *Registry) onCRD(ctx context.Context, ev event) *proxypush.PushRequest {
	u, ok := ev.obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	c := parseCRD(u)
	istio := istioGroups[c.group]
	gateway := r.opts.GatewayAPI && c.group == GatewayAPIGroup && gatewayAPIKinds[c.kind]
	if !istio && !gateway {
		return nil
	}
	key := c.key()
	w := r.kinds[key]
	if ev.typ == eventDelete {
		if w == nil || !w.installed {
			return nil
		}
		w.installed = false
		r.updateKindsView()
		r.log.Warn("CRD deleted; its objects are no longer served", "kind", key)
		return fullPush(proxypush.ConfigUpdate)
	}
	if !c.established {
		return nil
	}
	if w != nil {
		if w.installed {
			return nil
		}
		w.installed = true
		r.updateKindsView()
		r.log.Info("CRD installed again", "kind", key)
		return fullPush(proxypush.ConfigUpdate)
	}
	// The first served version is the one watched.
	if len(c.served) > 0 {
		version := c.served[0]
		gvr := schema.GroupVersionResource{Group: c.group, Version: version, Resource: c.plural}
		inf := r.dynFactory.ForResource(gvr).Informer()
		// Fails only for an informer already running, which has it.
		_ = inf.SetTransform(stripManagedFields)
		reg, err := inf.AddEventHandler(r.queue.handlerFor(key))
		if err != nil {
			r.log.Error("cannot watch kind", "kind", key, "error", err)
			return nil
		}
		w = &watchedKind{key: key, gvr: gvr, informer: inf, registration: reg, installed: true}
		r.kinds[key] = w
		r.handlers[key] = r.onConfig(c.group, c.kind)
		if istioconfig.GroupOf(proxypush.Kind(c.kind)) == c.group || gateway {
			r.status.watch(gvr, inf.GetStore())
		}
		r.dynFactory.Start(ctx.Done())
		if r.HasSynced() {
			r.log.Info("CRD installed; starting its informer", "kind", key, "version", version)
			// Joins the snapshot once listed; the worker must not wait.
			go func() {
				if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
					r.queue.push(event{kind: kindSynced, obj: key})
				}
			}()
		}
		return nil
	}
	r.log.Warn("no served version of the CRD can be read", "kind", key, "served", c.served)
	return nil
}

// onKindSynced: a kind installed after start has its objects listed.
func (r *Registry) onKindSynced(_ context.Context, ev event) *proxypush.PushRequest {
	key, _ := ev.obj.(string)
	w := r.kinds[key]
	if w == nil || w.synced {
		return nil
	}
	w.synced = true
	r.updateKindsView()
	r.log.Info("watching kind", "kind", key, "objects", len(w.informer.GetStore().ListKeys()))
	return fullPush(proxypush.ConfigUpdate)
}
