package kube

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/straitmesh/strait/internal/inject"
)

// WatchConfigMap keeps inj's settings in step with the ConfigMap
// namespace/name (keys "config" and "values", as Istio's
// istio-sidecar-injector) until ctx ends. A ConfigMap
// that does not parse is logged and the previous settings stay; a deleted
// one brings back the shipped defaults.
func WatchConfigMap(ctx context.Context, cfg *rest.Config, namespace, name string, inj *inject.Injector, logger *slog.Logger) error {
	log := logger.With("component", "inject-config", "configmap", namespace+"/"+name)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	informer := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(core.RESTClient(), "configmaps", namespace, fields.OneTermEqualSelector("metadata.name", name)),
		&corev1.ConfigMap{}, 0, cache.Indexers{})
	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != name {
			return
		}
		s, err := inject.SettingsFromConfigMap(cm.Data, nil)
		if err != nil {
			log.Error("injector config not applied; keeping the previous one", "error", err)
			return
		}
		inj.Update(s)
		log.Info("injector config applied", "resource_version", cm.ResourceVersion)
	}
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
		DeleteFunc: func(any) {
			inj.Update(inject.DefaultSettings())
			log.Info("injector ConfigMap deleted; using the shipped template and values")
		},
	})
	if err != nil {
		return err
	}
	informer.Run(ctx.Done())
	return nil
}
