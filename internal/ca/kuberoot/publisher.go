// Package kuberoot publishes the mesh's trust bundle to every namespace of
// a Kubernetes cluster as the ConfigMap istio-ca-root-cert (key
// root-cert.pem), which injected pods mount at /var/run/secrets/istio for
// the agent to trust straitd's TLS port — the job of Istio's
// NamespaceController (pilot/pkg/serviceregistry/kube/controller/namespacecontroller.go).
package kuberoot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	// ConfigMapName is Istio's (CA_CERT_CONFIGMAP_NAME default).
	ConfigMapName = "istio-ca-root-cert"
	// DataKey is the key of the trust bundle in it, Istio's.
	DataKey = "root-cert.pem"
)

// configMapLabels mark the ConfigMap as mesh config, as Istio labels it.
var configMapLabels = map[string]string{"istio.io/config": "true"}

// Options configure a Publisher.
type Options struct {
	Client kubernetes.Interface
	// Bundle returns the current trust bundle (PEM).
	Bundle func() []byte
	// Changed returns a channel closed when the bundle may have changed.
	Changed func() <-chan struct{}
	// Skip are namespaces never written (Istio skips kube-public,
	// kube-node-lease and local-path-storage, not kube-system).
	Skip   []string
	Logger *slog.Logger
}

// Publisher keeps the ConfigMap in every namespace equal to the bundle.
type Publisher struct {
	opts  Options
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[string] // namespace names
}

// New builds a Publisher; Run starts it.
func New(opts Options) *Publisher {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Skip == nil {
		opts.Skip = []string{"kube-public", "kube-node-lease", "local-path-storage"}
	}
	return &Publisher{
		opts:  opts,
		log:   opts.Logger.With("component", "root-cert-publisher"),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
}

// Run watches namespaces and the ConfigMaps until ctx is done. A namespace
// created later gets the ConfigMap; an edited or deleted ConfigMap is put
// back; a bundle change rewrites every namespace's.
func (p *Publisher) Run(ctx context.Context) error {
	defer p.queue.ShutDown()
	nsFactory := informers.NewSharedInformerFactory(p.opts.Client, 10*time.Minute)
	cmFactory := informers.NewSharedInformerFactoryWithOptions(p.opts.Client, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
		}))
	nsInformer := nsFactory.Core().V1().Namespaces().Informer()
	cmInformer := cmFactory.Core().V1().ConfigMaps().Informer()
	enqueue := func(ns string) {
		if !slices.Contains(p.opts.Skip, ns) {
			p.queue.Add(ns)
		}
	}
	if _, err := nsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { enqueue(o.(*corev1.Namespace).Name) },
		UpdateFunc: func(_, o any) { enqueue(o.(*corev1.Namespace).Name) },
	}); err != nil {
		return err
	}
	handleCM := func(o any) {
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		if cm, ok := o.(*corev1.ConfigMap); ok {
			enqueue(cm.Namespace)
		}
	}
	if _, err := cmInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) { handleCM(o) },
		DeleteFunc: handleCM,
	}); err != nil {
		return err
	}
	nsFactory.Start(ctx.Done())
	cmFactory.Start(ctx.Done())
	defer nsFactory.Shutdown()
	defer cmFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nsInformer.HasSynced, cmInformer.HasSynced) {
		return nil // ctx done
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				p.queue.ShutDown()
				return
			case <-p.opts.Changed():
				for _, ns := range nsInformer.GetStore().ListKeys() {
					enqueue(ns)
				}
			}
		}
	}()
	for p.processNext(ctx) {
	}
	return nil
}

func (p *Publisher) processNext(ctx context.Context) bool {
	ns, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(ns)
	if err := p.reconcile(ctx, ns); err != nil {
		if p.queue.NumRequeues(ns) < 5 {
			p.queue.AddRateLimited(ns)
		} else {
			p.queue.Forget(ns)
		}
		p.log.Warn("root certificate ConfigMap not written", "namespace", ns, "error", err)
		return true
	}
	p.queue.Forget(ns)
	return true
}

// reconcile makes the namespace's ConfigMap hold the bundle.
func (p *Publisher) reconcile(ctx context.Context, ns string) error {
	bundle := string(p.opts.Bundle())
	cms := p.opts.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: ns, Labels: configMapLabels},
			Data:       map[string]string{DataKey: bundle},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) { // a race, or the namespace is going away
			return nil
		}
		if err != nil {
			return fmt.Errorf("create %s/%s: %w", ns, ConfigMapName, err)
		}
		p.log.Debug("root certificate published", "namespace", ns)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s/%s: %w", ns, ConfigMapName, err)
	}
	if cm.Data[DataKey] == bundle {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[DataKey] = bundle
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update %s/%s: %w", ns, ConfigMapName, err)
	}
	p.log.Info("root certificate updated", "namespace", ns)
	return nil
}
