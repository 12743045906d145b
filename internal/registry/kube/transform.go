package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The informers' caches hold every watched object for the life of the
// process. These transforms run before an object is cached and drop what
// the mesh never reads, which is also what takes most of the memory.

// stripManagedFields drops metadata.managedFields (server-side apply
// bookkeeping, often larger than the object itself).
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// stripSecret keeps of a Secret what a Gateway credential reads: its
// namespace, name, identity, type and data. Its managed fields,
// annotations (kubectl's last-applied-configuration holds the whole data
// again) and labels go.
func stripSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return stripManagedFields(obj)
	}
	s.ManagedFields, s.Annotations, s.Labels, s.OwnerReferences = nil, nil, nil, nil
	s.StringData = nil // never set on a Secret read from the API
	return s, nil
}

// stripCRD drops a CustomResourceDefinition's managed fields and the
// OpenAPI schema of each version (Istio's CRDs carry hundreds of KiB of
// schema each), keeping what parseCRD reads: group, names, the versions'
// names and served flags, and the status conditions.
func stripCRD(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return stripManagedFields(obj)
	}
	u.SetManagedFields(nil)
	u.SetAnnotations(nil) // kubectl's last-applied-configuration copies the whole CRD
	versions, found, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	if found {
		for _, v := range versions {
			if m, ok := v.(map[string]any); ok {
				delete(m, "schema")
				delete(m, "additionalPrinterColumns")
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")
	}
	return u, nil
}
