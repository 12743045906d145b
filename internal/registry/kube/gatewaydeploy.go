package kube

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/straitmesh/strait/internal/registry/kube/gatewayapi"
)

// Istio's automated deployment of a Gateway API Gateway
// (pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go): for each
// Gateway of our class without spec.addresses, a ServiceAccount, a
// Deployment and a Service named NAME-CLASS in the Gateway's namespace
// (and a Role and RoleBinding of that name for its Secrets),
// owned by the Gateway (deleted with it), applied server-side with
// Istio's field manager. The pod is the one the chart's ingress gateway
// runs (templates/ingressgateway.yaml): container istio-proxy, image
// "auto", annotated inject.istio.io/templates: gateway, so the injector
// makes it strait-agent in router mode; the Istio Gateways translated
// from the Gateway select it by gateway.networking.k8s.io/gateway-name
// and gateway.strait.io/namespace (gatewayapi.PodSelector).

// gatewayFieldManager is Istio's field manager for what it deploys.
const gatewayFieldManager = "istio.io/gateway-controller"

// managedLabel marks the objects deployed for a Gateway (Istio's).
const (
	managedLabel = "gateway.istio.io/managed"
	managedValue = "istio.io-gateway-controller"
)

var (
	serviceAccountGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	serviceGVR        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	deploymentGVR     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	roleGVR           = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	roleBindingGVR    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

// gatewayDeployer applies the objects of each Gateway to deploy. The
// registry's worker tells it the Gateways (set); the leader's write loop
// (run) applies each one whose objects changed, and all of them at the
// start of its term. Safe for concurrent use.
type gatewayDeployer struct {
	log    *slog.Logger
	client dynamic.Interface

	mu   sync.Mutex
	want map[string][]*unstructured.Unstructured // by Gateway namespace/name
	// queue holds the Gateways to apply; nil while no write loop runs.
	queue workqueue.TypedRateLimitingInterface[string]
	// applied is what was last applied per Gateway in this term. Owned
	// by the write loop.
	applied map[string][]*unstructured.Unstructured
}

func newGatewayDeployer(client dynamic.Interface, log *slog.Logger) *gatewayDeployer {
	return &gatewayDeployer{log: log, client: client, want: map[string][]*unstructured.Unstructured{}}
}

// set records the Gateways to deploy.
func (d *gatewayDeployer) set(deps []gatewayapi.Deployment) {
	want := make(map[string][]*unstructured.Unstructured, len(deps))
	for _, dep := range deps {
		want[dep.Gateway.Namespace+"/"+dep.Gateway.Name] = deploymentObjects(dep)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for key, objs := range want {
		if old, ok := d.want[key]; !ok || !reflect.DeepEqual(old, objs) {
			if d.queue != nil {
				d.queue.Add(key)
			}
		}
	}
	d.want = want
}

// run applies until ctx is done (one leader's term).
func (d *gatewayDeployer) run(ctx context.Context) error {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "strait-gateway-deployer"})
	d.mu.Lock()
	if d.queue != nil {
		d.mu.Unlock()
		q.ShutDown()
		return errors.New("kube registry: gateway deployer already running")
	}
	d.queue = q
	d.applied = map[string][]*unstructured.Unstructured{}
	for key := range d.want {
		q.Add(key)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		d.mu.Lock()
		d.queue = nil
		d.mu.Unlock()
		q.ShutDown()
	})
	for {
		key, quit := q.Get()
		if quit {
			break
		}
		d.sync(ctx, q, key)
		q.Done(key)
	}
	wg.Wait()
	return nil
}

func (d *gatewayDeployer) sync(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], key string) {
	d.mu.Lock()
	objs, ok := d.want[key]
	d.mu.Unlock()
	if !ok || reflect.DeepEqual(d.applied[key], objs) {
		q.Forget(key)
		return
	}
	for _, o := range objs {
		gvr := serviceAccountGVR
		switch o.GetKind() {
		case "Deployment":
			gvr = deploymentGVR
		case "Service":
			gvr = serviceGVR
		case "Role":
			gvr = roleGVR
		case "RoleBinding":
			gvr = roleBindingGVR
		}
		_, err := d.client.Resource(gvr).Namespace(o.GetNamespace()).Apply(ctx, o.GetName(), o,
			metav1.ApplyOptions{FieldManager: gatewayFieldManager, Force: true})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			msg := "cannot deploy the gateway of a Gateway; retrying"
			if apierrors.IsForbidden(err) {
				msg += " (grant straitd create and patch on serviceaccounts, services, deployments, roles and rolebindings)"
			}
			d.log.Warn(msg, "gateway", key, "object", o.GetKind()+" "+o.GetName(), "error", err)
			q.AddRateLimited(key)
			return
		}
	}
	d.applied[key] = objs
	d.log.Info("gateway deployed", "gateway", key, "name", objs[0].GetName())
	q.Forget(key)
}

// deploymentObjects are the objects deployed for dep: ServiceAccount, a
// Role and RoleBinding letting it read its namespace's Secrets (as the
// chart's ingress gateway has: straitd serves a Gateway's credential only
// to a service account that may list them, secretauthz.go), Deployment
// and Service, in the order they are applied.
func deploymentObjects(dep gatewayapi.Deployment) []*unstructured.Unstructured {
	g := dep.Gateway
	name := gatewayapi.DeploymentName(g.Name, string(g.Spec.GatewayClassName))
	labels := map[string]any{gatewayapi.GatewayNameLabel: g.Name, managedLabel: managedValue}
	meta := func() map[string]any {
		return map[string]any{
			"name": name, "namespace": g.Namespace, "labels": maps.Clone(labels),
			"ownerReferences": []any{map[string]any{
				"apiVersion": gatewayapi.Group + "/v1", "kind": "Gateway", "name": g.Name, "uid": string(g.UID),
			}},
		}
	}
	selector := map[string]any{gatewayapi.GatewayNameLabel: g.Name}
	var containerPorts, servicePorts []any
	for _, p := range dep.Ports {
		servicePorts = append(servicePorts, map[string]any{
			"name": p.Name, "port": int64(p.Port), "protocol": "TCP", "appProtocol": p.AppProtocol,
		})
		if p.Port != gatewayapi.StatusPort {
			containerPorts = append(containerPorts, map[string]any{"containerPort": int64(p.Port), "name": p.Name, "protocol": "TCP"})
		}
	}
	podLabels := maps.Clone(labels)
	podLabels["sidecar.istio.io/inject"] = "true"
	// The translated Istio Gateways select the pods by name and namespace
	// (gatewayapi.PodSelector). The Deployment's and Service's selectors
	// keep the name only: they are of the namespace already, and a
	// Deployment's selector cannot change.
	for k, v := range gatewayapi.PodSelector(g.Namespace, g.Name) {
		podLabels[k] = v
	}
	container := map[string]any{"name": "istio-proxy", "image": "auto"}
	if len(containerPorts) > 0 {
		container["ports"] = containerPorts
	}
	svcType := g.Annotations[gatewayapi.ServiceTypeAnnotation]
	if svcType == "" {
		svcType = "LoadBalancer"
	}
	return []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()}},
		{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(),
			"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get", "watch", "list"}}},
		}},
		{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(),
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": g.Namespace}},
		}},
		{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(),
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": selector},
				"template": map[string]any{
					"metadata": map[string]any{
						"labels":      podLabels,
						"annotations": map[string]any{"inject.istio.io/templates": "gateway"},
					},
					"spec": map[string]any{
						"serviceAccountName": name,
						"containers":         []any{container},
					},
				},
			},
		}},
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": meta(),
			"spec": map[string]any{"type": svcType, "selector": selector, "ports": servicePorts},
		}},
	}
}
