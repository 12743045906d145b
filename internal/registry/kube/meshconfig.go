package kube

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/straitmesh/strait/internal/meshconfig"
)

// MeshConfigMapName is the ConfigMap whose "mesh" key holds the mesh
// config, in the control plane's namespace, as istiod reads it.
const MeshConfigMapName = "istio"

// meshFromConfigMap parses the mesh key of the istio ConfigMap (absent:
// Istio's defaults).
func meshFromConfigMap(cm *corev1.ConfigMap) (*meshconfig.Config, error) {
	m, err := meshconfig.Parse([]byte(cm.Data["mesh"]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key mesh: %w", cm.Namespace, cm.Name, err)
	}
	return m, nil
}

// LoadMeshConfig reads the mesh config from the istio ConfigMap in
// namespace once: Istio's defaults when the ConfigMap does not exist; an
// error when it cannot be read or holds a field Strait refuses.
func LoadMeshConfig(ctx context.Context, cfg *rest.Config, namespace string) (*meshconfig.Config, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cm, err := core.ConfigMaps(namespace).Get(ctx, MeshConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return meshconfig.Default(), nil
	case err != nil:
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, MeshConfigMapName, err)
	}
	return meshFromConfigMap(cm)
}

// WatchMeshConfig calls onChange with the mesh config of the istio
// ConfigMap in namespace whenever it differs from the one applied (at
// first, applied: what LoadMeshConfig returned), until ctx ends. A mesh
// config that Strait refuses is logged at WARN, naming the field, and the
// previous one stays; a deleted ConfigMap brings back Istio's defaults.
func WatchMeshConfig(ctx context.Context, cfg *rest.Config, namespace string, applied *meshconfig.Config, onChange func(*meshconfig.Config), logger *slog.Logger) error {
	log := logger.With("component", "mesh-config", "configmap", namespace+"/"+MeshConfigMapName)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	informer := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(core.RESTClient(), "configmaps", namespace, fields.OneTermEqualSelector("metadata.name", MeshConfigMapName)),
		&corev1.ConfigMap{}, 0, cache.Indexers{})
	// applied is only touched by the informer's handler goroutine.
	set := func(m *meshconfig.Config) bool {
		if applied != nil && proto.Equal(applied.Mesh, m.Mesh) {
			return false // a resync, or the content already applied
		}
		applied = m
		onChange(m)
		return true
	}
	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != MeshConfigMapName {
			return
		}
		m, err := meshFromConfigMap(cm)
		if err != nil {
			log.Warn("mesh config not applied; keeping the previous one", "error", err)
			return
		}
		if set(m) {
			log.Info("mesh config applied", "resource_version", cm.ResourceVersion, "settings", m.String())
		}
	}
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
		DeleteFunc: func(any) {
			if set(meshconfig.Default()) {
				log.Info("mesh ConfigMap deleted; using Istio's defaults")
			}
		},
	})
	if err != nil {
		return err
	}
	informer.Run(ctx.Done())
	return nil
}
