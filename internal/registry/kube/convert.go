package kube

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/locality"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// ExportToAnnotation limits a Service's visibility like a ServiceEntry's
// spec.exportTo (comma separated; "." is the Service's namespace).
const ExportToAnnotation = "networking.istio.io/exportTo"

// Config names of the ServiceEntries and WorkloadEntries derived from
// Kubernetes objects. The prefix keeps them apart from real Istio configs
// of the same name.
const (
	servicePrefix = "kubernetes-service."
	podPrefix     = "kubernetes-pod."
)

// serviceKey is the config key of the ServiceEntry derived from a
// Service: push requests name it, so that the xDS server's push filter
// treats Kubernetes Services like ServiceEntries.
func serviceKey(namespace, name string) proxypush.ConfigKey {
	return proxypush.ConfigKey{Kind: istioconfig.KindServiceEntry, Name: servicePrefix + name, Namespace: namespace}
}

// podKey is the config key of the WorkloadEntry derived from a pod.
func podKey(namespace, name string) proxypush.ConfigKey {
	return proxypush.ConfigKey{Kind: istioconfig.KindWorkloadEntry, Name: podPrefix + name, Namespace: namespace}
}

// podLabels returns the labels and the locality of a pod; nil and "" for
// a pod it does not know.
type podLabels func(namespace, name string) (labels map[string]string, locality string)

// serviceEntryFor converts a Kubernetes Service and its EndpointSlices into
// the ServiceEntry the service model is built from: host
// NAME.NAMESPACE.svc.DOMAIN, the cluster IPs as addresses (headless: none,
// resolution NONE), the ports with their protocols, and one endpoint per
// ready address. It returns nil for Services the mesh does not serve
// (ExternalName).
func serviceEntryFor(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, labels podLabels, domain string) *istioconfig.Config {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	se := &networking.ServiceEntry{
		Hosts:      []string{svc.Name + "." + svc.Namespace + ".svc." + domain},
		Location:   networking.ServiceEntry_MESH_INTERNAL,
		Resolution: networking.ServiceEntry_STATIC,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		se.Resolution = networking.ServiceEntry_NONE
	} else {
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		se.Addresses = slices.Clone(ips)
	}
	if v := svc.Annotations[ExportToAnnotation]; v != "" {
		for e := range strings.SplitSeq(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				se.ExportTo = append(se.ExportTo, e)
			}
		}
	}
	portNames := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		proto, ok := servicePortProtocol(p)
		if !ok {
			continue
		}
		port := &networking.ServicePort{Number: uint32(p.Port), Protocol: string(proto), Name: p.Name}
		if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal > 0 {
			port.TargetPort = uint32(p.TargetPort.IntVal)
		}
		se.Ports = append(se.Ports, port)
		portNames[p.Name] = true
	}
	var hostnames string
	se.Endpoints, hostnames = endpointsFor(eps, portNames, labels)
	c := &istioconfig.Config{
		Meta: istioconfig.Meta{
			Kind: istioconfig.KindServiceEntry, APIVersion: istioconfig.NetworkingGroup + "/v1",
			Name: serviceKey(svc.Namespace, svc.Name).Name, Namespace: svc.Namespace, Labels: svc.Labels,
			Source: istioconfig.Source{File: "kubernetes Service " + svc.Namespace + "/" + svc.Name},
		},
		Spec: se,
	}
	if hostnames != "" {
		c.Annotations = map[string]string{mesh.EndpointHostnamesAnnotation: hostnames}
	}
	return c
}

// endpointsFor returns one endpoint per ready address of the slices, with
// the slice's ports by service port name and the labels of the pod behind
// it, and the endpoints' hostnames in mesh.EndpointHostnamesAnnotation's
// form (sorted by address; empty when none has one). Addresses that are
// not ready are left out, including terminating ones that still serve:
// they get no new connections.
func endpointsFor(eps []*discoveryv1.EndpointSlice, portNames map[string]bool, labels podLabels) ([]*networking.WorkloadEntry, string) {
	type key struct{ addr, ports string }
	seen := map[key]bool{}
	hostnames := map[string]string{}
	var out []*networking.WorkloadEntry
	for _, s := range eps {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		ports := map[string]uint32{}
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if p.Port == nil || !portNames[name] {
				continue
			}
			if p.Protocol != nil && *p.Protocol == corev1.ProtocolSCTP {
				continue
			}
			ports[name] = uint32(*p.Port)
		}
		if len(ports) == 0 {
			continue
		}
		portsKey := fmt.Sprint(ports) // fmt sorts map keys
		for _, e := range s.Endpoints {
			if !endpointReady(e) {
				continue
			}
			var l map[string]string
			var loc string
			if ref := e.TargetRef; ref != nil && ref.Kind == "Pod" && labels != nil {
				ns := ref.Namespace
				if ns == "" {
					ns = s.Namespace
				}
				l, loc = labels(ns, ref.Name)
			}
			for _, addr := range e.Addresses {
				if e.Hostname != nil && *e.Hostname != "" {
					hostnames[addr] = *e.Hostname
				}
				if seen[key{addr, portsKey}] {
					continue
				}
				seen[key{addr, portsKey}] = true
				out = append(out, &networking.WorkloadEntry{Address: addr, Ports: ports, Labels: l, Locality: loc})
			}
		}
	}
	slices.SortFunc(out, func(a, b *networking.WorkloadEntry) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(fmt.Sprint(a.Ports), fmt.Sprint(b.Ports)))
	})
	var items []string
	for _, addr := range slices.Sorted(maps.Keys(hostnames)) {
		items = append(items, addr+"="+hostnames[addr])
	}
	return out, strings.Join(items, ",")
}

// endpointReady applies EndpointSlice semantics: a nil ready condition
// means ready.
func endpointReady(e discoveryv1.Endpoint) bool {
	return e.Conditions.Ready == nil || *e.Conditions.Ready
}

// podLocality is where a pod runs, as Istio's Kubernetes registry reads it
// (getPodLocality): its istio-locality label, else its node's topology
// labels (nodeLocality, which may be nil). Topology labels on the pod
// itself (copied there by the API server at binding) are not read: the
// node's are the current ones.
func podLocality(pod *corev1.Pod, nodeLocality func(node string) string) string {
	if v := pod.Labels[locality.Label]; v != "" {
		return locality.FromLabel(v)
	}
	if nodeLocality == nil || pod.Spec.NodeName == "" {
		return ""
	}
	return nodeLocality(pod.Spec.NodeName)
}

// workloadEntryFor makes a pod addressable by ServiceEntry workload
// selectors, like a WorkloadEntry, in locality loc. Pods without an IP,
// on the host's network, or finished are left out (nil).
func workloadEntryFor(pod *corev1.Pod, loc string) *istioconfig.Config {
	if pod.Status.PodIP == "" || pod.Spec.HostNetwork || podFinished(pod) {
		return nil
	}
	return &istioconfig.Config{
		Meta: istioconfig.Meta{
			Kind: istioconfig.KindWorkloadEntry, APIVersion: istioconfig.NetworkingGroup + "/v1",
			Name: podKey(pod.Namespace, pod.Name).Name, Namespace: pod.Namespace, Labels: pod.Labels,
			Source: istioconfig.Source{File: "kubernetes Pod " + pod.Namespace + "/" + pod.Name},
		},
		Spec: &networking.WorkloadEntry{
			Address: pod.Status.PodIP, Labels: pod.Labels, ServiceAccount: pod.Spec.ServiceAccountName,
			Locality: loc,
		},
	}
}

func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// convertedConfig caches the conversion of one Istio object version.
type convertedConfig struct {
	ref             objectRef
	resourceVersion string
	// generation and metaHash (metaHash) identify what the conversion
	// read: a new resource version with both unchanged is a status write.
	generation int64
	metaHash   uint64
	cfg        *istioconfig.Config
	err        error
	// messages are err's validation messages (messagesFor).
	messages []validationMessage
}

// istioConfig converts an object of a kind Strait translates (from a
// dynamic informer: *unstructured.Unstructured) into a validated config,
// through the same parser and validation as the file registry, so an
// unknown or invalid field is reported the same way. A kind Strait does not
// translate yields (nil, nil).
func istioConfig(group, kind, version string, obj any) (*istioconfig.Config, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected object %T", kind, obj)
	}
	spec, ok := u.Object["spec"]
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: no spec", kind, u.GetNamespace(), u.GetName())
	}
	doc, err := json.Marshal(map[string]any{
		"apiVersion": group + "/" + version,
		"kind":       kind,
		"metadata":   map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "labels": u.GetLabels(), "annotations": u.GetAnnotations(), "creationTimestamp": u.GetCreationTimestamp()},
		"spec":       spec,
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, u.GetNamespace(), u.GetName(), err)
	}
	res := istioconfig.ParseFile(fmt.Sprintf("kubernetes %s %s/%s", kind, u.GetNamespace(), u.GetName()), doc)
	if res.Err != nil {
		return nil, res.Err
	}
	if len(res.Configs) != 1 {
		return nil, nil // a kind the config package does not handle
	}
	return res.Configs[0], nil
}

// metaHash hashes the metadata istioConfig reads besides the spec (whose
// changes bump the generation): labels and annotations.
func metaHash(obj any) uint64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	h := xxhash.New()
	for _, kv := range []map[string]string{m.GetLabels(), m.GetAnnotations()} {
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			_, _ = h.WriteString(k)
			_, _ = h.Write([]byte{0})
			_, _ = h.WriteString(kv[k])
			_, _ = h.Write([]byte{0})
		}
		_, _ = h.Write([]byte{1})
	}
	return h.Sum64()
}

// uidOf returns an object's UID and resource version.
func uidOf(obj any) (types.UID, string) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", ""
	}
	return m.GetUID(), m.GetResourceVersion()
}

// logConfigError reports a config object that is not served: at WARN with
// its name and the fields Strait refuses when it sets fields Strait does not
// support yet (the user's rules are not applied, so never only at debug),
// else as invalid.
func logConfigError(log *slog.Logger, kind string, obj any, err error) {
	name := ""
	if m, merr := meta.Accessor(obj); merr == nil {
		name = m.GetNamespace() + "/" + m.GetName()
	}
	if errors.Is(err, istioconfig.ErrNotSupported) {
		log.Warn("config refused: it sets fields Strait does not support yet; not served", "kind", kind, "name", name, "error", err.Error())
		return
	}
	log.Error("invalid config; ignored", "kind", kind, "name", name, "error", err.Error())
}
