package kube

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/straitmesh/strait/internal/config"
	"github.com/straitmesh/strait/internal/model"
	"github.com/straitmesh/strait/internal/registry"
)

// buildStore collects everything the service model is built from: the
// static source's configs, the Istio configs of the kinds Strait
// translates, a ServiceEntry per Kubernetes Service (with its ready
// endpoints) and a WorkloadEntry per running pod. It runs on the worker
// (and once in New, before any informer runs).
func (r *Registry) buildStore() *config.Store {
	store := config.NewStore()
	var problems []string
	add := func(c *config.Config) {
		if err := store.Add(c); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if r.opts.Static != nil {
		if s := r.opts.Static.Snapshot(); s != nil {
			for _, kind := range config.Kinds {
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
		if !w.installed || !w.synced || group != config.NetworkingGroup || !slices.Contains(config.Kinds, model.Kind(kind)) {
			continue
		}
		for _, obj := range w.informer.GetStore().List() {
			uid, rv := uidOf(obj)
			seen[uid] = true
			cc, ok := r.converted[uid]
			if !ok || cc.resourceVersion != rv {
				cfg, err := istioConfig(group, kind, w.gvr.Version, obj)
				if err != nil {
					r.log.Error("invalid config; ignored", "kind", kind, "error", err.Error())
				}
				cc = convertedConfig{resourceVersion: rv, cfg: cfg, err: err}
				r.converted[uid] = cc
			}
			if cc.cfg != nil {
				add(cc.cfg)
			}
		}
	}
	for uid := range r.converted {
		if !seen[uid] {
			delete(r.converted, uid)
		}
	}

	pods := func(key string) (*corev1.Pod, bool) {
		obj, ok, _ := r.pods.GetIndexer().GetByKey(key)
		if !ok {
			return nil, false
		}
		return obj.(*corev1.Pod), true
	}
	inUse := map[types.UID]bool{}
	for _, obj := range r.services.GetStore().List() {
		svc := obj.(*corev1.Service)
		objs, _ := r.slices.GetIndexer().ByIndex(sliceSvcIndex, svc.Namespace+"/"+svc.Name)
		eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			eps = append(eps, o.(*discoveryv1.EndpointSlice))
		}
		slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
		if c := r.derived.serviceEntry(svc, eps, pods, r.opts.Domain, inUse); c != nil {
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

// publish builds and stores a new snapshot from store.
func (r *Registry) publish(store *config.Store, logIt bool) {
	r.version++
	snap, problems := registry.Build(store, registry.BuildOptions{Domain: r.opts.Domain, Version: r.version, Previous: r.snap.Load()})
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.Error())
	}
	r.logProblems(msgs)
	r.snap.Store(snap)
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
