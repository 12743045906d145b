package kube

import (
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// buildStore collects everything the service model is built from: the
// static source's configs, the Istio configs of the kinds Strait
// translates, a ServiceEntry per Kubernetes Service (with its ready
// endpoints) and a WorkloadEntry per running pod. It runs on the worker
// (and once in New, before any informer runs).
func (r *Registry) buildStore() *istioconfig.Store {
	store := istioconfig.NewStore()
	var problems []string
	add := func(c *istioconfig.Config) {
		if err := store.Add(c); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if r.opts.Static != nil {
		if s := r.opts.Static.Snapshot(); s != nil {
			for _, kind := range istioconfig.Kinds {
				for _, c := range s.Configs.List(kind) {
					add(c)
				}
			}
		}
	}

	seen := map[types.UID]bool{}
	for _, key := range sortedKeys(r.kinds) {
		w := r.kinds[key]
		group, kind, _ := strings.Cut(key, "/")
		if !w.installed || !w.synced || group != istioconfig.GroupOf(proxypush.Kind(kind)) {
			continue
		}
		for _, obj := range w.informer.GetStore().List() {
			uid, rv := uidOf(obj)
			seen[uid] = true
			cc, ok := r.converted[uid]
			switch gen, meta := generationOf(obj), metaHash(obj); {
			case ok && cc.resourceVersion == rv:
			case ok && gen != 0 && cc.generation == gen && cc.metaHash == meta:
				// Status only (our own writes included): the conversion,
				// and its log line, stand.
				cc.resourceVersion = rv
				r.converted[uid] = cc
			default:
				cfg, err := istioConfig(group, kind, w.gvr.Version, obj)
				if err != nil {
					logConfigError(r.log, kind, obj, err)
				}
				cc = convertedConfig{ref: refOf(w.gvr, obj), resourceVersion: rv, generation: gen, metaHash: meta, cfg: cfg, err: err, messages: messagesFor(err)}
				r.converted[uid] = cc
			}
			if cc.cfg != nil {
				add(cc.cfg)
			}
		}
	}
	for uid, cc := range r.converted {
		if !seen[uid] {
			delete(r.converted, uid)
			r.status.forget(cc.ref, uid)
		}
	}

	r.translateGatewayAPI(add)

	inUse := map[types.UID]bool{}
	for _, obj := range r.services.GetStore().List() {
		if c := r.serviceEntry(obj.(*corev1.Service), inUse); c != nil {
			add(c)
		}
	}
	for _, obj := range r.pods.GetStore().List() {
		if c := r.derived.workloadEntry(obj.(*corev1.Pod), inUse); c != nil {
			add(c)
		}
	}
	r.derived.prune(inUse)
	r.logProblems(problems)
	return store
}

// serviceEntry returns the ServiceEntry of a Service and its
// EndpointSlices (from the derived cache when none of them changed); seen
// collects the UIDs of the objects in use.
func (r *Registry) serviceEntry(svc *corev1.Service, seen map[types.UID]bool) *istioconfig.Config {
	objs, _ := r.slices.GetIndexer().ByIndex(sliceSvcIndex, svc.Namespace+"/"+svc.Name)
	eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		eps = append(eps, o.(*discoveryv1.EndpointSlice))
	}
	slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return r.derived.serviceEntry(svc, eps, r.podByKey, r.opts.Domain, seen)
}

// podByKey looks a pod up by namespace/name in the informer's cache.
func (r *Registry) podByKey(key string) (*corev1.Pod, bool) {
	obj, ok, _ := r.pods.GetIndexer().GetByKey(key)
	if !ok {
		return nil, false
	}
	return obj.(*corev1.Pod), true
}

// updateEndpoints is the fast path for a batch of EndpointSlice events
// only, the common case at scale: it converts just the Services those
// slices belong to and derives the new snapshot from the current one
// (mesh.Snapshot.UpdateEndpoints) instead of rebuilding everything.
// It returns the old snapshot, the changed configs and true when it
// published; false when the batch needs a full rebuild (another kind of
// event, or a change that is more than endpoints).
func (r *Registry) updateEndpoints(evs []event) (*mesh.Snapshot, map[proxypush.ConfigKey]struct{}, bool) {
	services := map[string]bool{} // namespace/name
	for _, ev := range evs {
		if ev.kind != kindEndpointSlice {
			return nil, nil, false
		}
		for _, obj := range []any{ev.old, ev.obj} {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[serviceNameKey] != "" {
				services[s.Namespace+"/"+s.Labels[serviceNameKey]] = true
			}
		}
	}
	old := r.Snapshot()
	repl := map[proxypush.ConfigKey]*istioconfig.Config{}
	seen := map[types.UID]bool{}
	for key := range services {
		obj, ok, _ := r.services.GetIndexer().GetByKey(key)
		if !ok {
			continue // no Service (yet): the slice adds nothing
		}
		svc := obj.(*corev1.Service)
		c := r.serviceEntry(svc, seen)
		k := serviceKey(svc.Namespace, svc.Name)
		if c == nil || old.Configs.Get(k) == nil {
			return nil, nil, false
		}
		if c != old.Configs.Get(k) {
			repl[k] = c
		}
	}
	changed := make(map[proxypush.ConfigKey]struct{}, len(repl))
	for k := range repl {
		changed[k] = struct{}{}
	}
	if len(repl) == 0 {
		return old, changed, true // nothing the mesh reads changed
	}
	snap, ok := old.UpdateEndpoints(old.Configs.With(repl), changed, r.version+1)
	if !ok {
		return nil, nil, false
	}
	r.version++
	r.snap.Store(snap)
	r.log.Debug("snapshot updated", "version", snap.Version, "services", len(repl))
	return old, changed, true
}

// publish builds and stores a new snapshot from store.
func (r *Registry) publish(store *istioconfig.Store, logIt bool) {
	r.version++
	snap, problems := mesh.Build(store, mesh.BuildOptions{Domain: r.opts.Domain, RootNamespace: r.opts.RootNamespace, Mesh: r.mesh, Version: r.version, Previous: r.snap.Load(),
		Credentials: secretStore{r.secretsStore()}})
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.Error())
	}
	r.logProblems(msgs)
	r.snap.Store(snap)
	r.conflicts = r.conflictsByObject(problems)
	r.reportStatus()
	if logIt {
		r.log.Debug("snapshot published", "version", snap.Version, "configs", store.Len(), "services", len(snap.Services))
	}
}

// logProblems logs conflicts once, when they first appear, rather than on
// every rebuild.
func (r *Registry) logProblems(msgs []string) {
	if r.lastProblems == nil {
		r.lastProblems = map[string]bool{}
	}
	for _, m := range msgs {
		if !r.lastProblems[m] {
			r.log.Warn("config conflict", "error", m)
		}
	}
	for _, m := range msgs {
		r.lastProblems[m] = true
	}
}

// conflictsByObject maps the snapshot build's problems to the Istio
// objects they concern (the configs converted from the cluster, by their
// source; the static source's and the Services' are not objects with a
// status), sorted for a stable status.
func (r *Registry) conflictsByObject(problems []error) map[objectRef][]validationMessage {
	if len(problems) == 0 {
		return nil
	}
	bySource := make(map[string]objectRef, len(r.converted))
	for _, cc := range r.converted {
		if cc.cfg != nil {
			bySource[cc.cfg.Source.File] = cc.ref
		}
	}
	out := map[objectRef][]validationMessage{}
	for _, p := range problems {
		var fe *istioconfig.FieldError
		if !errors.As(p, &fe) {
			continue
		}
		if ref, ok := bySource[fe.File]; ok {
			out[ref] = append(out[ref], conflictMessage(p))
		}
	}
	for _, msgs := range out {
		slices.SortFunc(msgs, func(a, b validationMessage) int { return strings.Compare(a.description, b.description) })
	}
	return out
}

// reportStatus tells the status writer what each converted object's
// status should say: its conversion's messages and the conflicts of the
// published snapshot. The writer looks again only at the objects for which
// that changed.
func (r *Registry) reportStatus() {
	r.status.setAll(func(yield func(objectRef, wantedStatus) bool) {
		for uid, cc := range r.converted {
			msgs := cc.messages
			if c := r.conflicts[cc.ref]; len(c) > 0 {
				msgs = append(slices.Clip(msgs), c...)
			}
			if !yield(cc.ref, wantedStatus{uid: uid, generation: cc.generation, messages: msgs}) {
				return
			}
		}
		for ref, w := range r.gwStatus {
			if !yield(ref, w) {
				return
			}
		}
	})
}
