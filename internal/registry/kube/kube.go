// Package kube is the Kubernetes registry: it watches Services,
// EndpointSlices, Pods, Namespaces, Nodes and Secrets (the Gateways'
// credentials, which it also serves to the gateways: secrets.go) through
// client-go shared informers, and the Istio CRDs (through dynamic informers) and,
// when enabled, the Gateway API kinds that are installed in the cluster,
// and turns them into the same mesh.Snapshot the xDS generators read.
//
// The flow follows Istio's Kubernetes controller (pilot/pkg/serviceregistry/kube/controller):
// informer callbacks only push (event type, object) onto a queue; one
// worker goroutine drains it and runs the handler registered for the
// object's kind; handlers say what push the change needs (a Service or
// Istio config → full push, an EndpointSlice → endpoints-only push, a pod
// label change → a push naming that pod's proxy); the worker rebuilds the
// snapshot once per batch and hands the merged PushRequest to onChange
// (the xDS server's ConfigUpdate).
//
// CRD-backed kinds are found through the API in four steps: (1) list the
// CRDs, (2) keep the kinds of interest, (3) get the informer for each, (4)
// register the callbacks. CRDs installed later start their informers without a
// restart.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// Handler keys of the built-in kinds. CRD-backed kinds use "GROUP/Kind".
const (
	kindService       = "Service"
	kindEndpointSlice = "EndpointSlice"
	kindPod           = "Pod"
	kindNamespace     = "Namespace"
	kindNode          = "Node"
	kindCRD           = "CustomResourceDefinition"
	kindSecretEvent   = string(KindSecret)
	// Internal events.
	kindSynced = "strait/informer-synced" // obj: the handler key of a kind whose informer synced
	kindStatic = "strait/static"          // obj: the *proxypush.PushRequest of the static source
	kindMesh   = "strait/mesh"            // obj: the new *meshconfig.Config
)

// kindSyncTimeout bounds how long the first sync waits for the CRD-backed
// kinds before serving without the ones not yet listed.
const kindSyncTimeout = 30 * time.Second

// Index names of the informers' indexers.
const (
	podIPIndex     = "podIP"
	sliceSvcIndex  = "service"
	serviceNameKey = discoveryv1.LabelServiceName
)

// Source is a snapshot provider served together with the cluster's
// objects; *file.Registry implements it.
type Source interface {
	Snapshot() *mesh.Snapshot
}

// Options configure a Registry.
type Options struct {
	// Config is the API server's client config; required. See
	// ConfigFromKubeconfig.
	Config *rest.Config
	// Domain is the cluster DNS domain; default "cluster.local".
	Domain string
	// RootNamespace is the namespace whose selector-less Sidecar is the
	// mesh default; default mesh.DefaultRootNamespace.
	RootNamespace string
	// Mesh is the mesh config; nil is Istio's defaults.
	Mesh *meshconfig.Config
	// Static, if set, is served together with the cluster's objects (the
	// file registry's ServiceEntries, WorkloadEntries, VirtualServices and
	// DestinationRules). Pass StaticChanged as its change callback.
	Static Source
	// GatewayAPI watches the Gateway API kinds whose CRDs are installed
	// (PILOT_ENABLE_GATEWAY_API=true).
	GatewayAPI bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ConfigFromKubeconfig returns the client config of a kubeconfig file, or
// the in-cluster config (service-account token, KUBERNETES_SERVICE_HOST)
// when path is empty.
func ConfigFromKubeconfig(path string) (*rest.Config, error) {
	if path == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not running in a pod: %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return c, nil
}

// handler turns one event of its kind into the push it needs (nil: none).
// Handlers run on the worker goroutine.
type handler func(ctx context.Context, ev event) *proxypush.PushRequest

// Registry serves a cluster's services and Istio configs.
//
// Snapshot, ResolveProxy, HasSynced, WatchedKinds and StaticChanged may be
// called from any goroutine; everything else is owned by Run's worker.
type Registry struct {
	// Set by New, read-only afterwards.
	opts  Options
	log   *slog.Logger
	core  corev1client.CoreV1Interface
	queue *queue
	// status reports refused and invalid Istio objects on their status
	// (written by WriteStatus); safe for concurrent use.
	status *statusWriter
	// coreInformers watch the built-in kinds; dynFactory the CRDs and the
	// CRD-backed kinds (Istio's included: they are converted from JSON).
	coreInformers *informerSet
	dynFactory    dynamicinformer.DynamicSharedInformerFactory
	services      cache.SharedIndexInformer
	slices        cache.SharedIndexInformer
	pods          cache.SharedIndexInformer
	namespaces    cache.SharedIndexInformer
	crds          cache.SharedIndexInformer
	secrets       cache.SharedIndexInformer // the Gateways' credentials (secrets.go)
	reviewer      *secretReviewer           // who may have them (secretauthz.go)
	coreSynced    []cache.InformerSynced
	syncedCh      chan struct{} // closed after the first snapshot from the cluster

	snap    atomic.Pointer[mesh.Snapshot]
	running atomic.Bool

	// kindsMu guards kindsView, a copy of the watched CRD kinds for
	// WatchedKinds.
	kindsMu   sync.Mutex
	kindsView []string

	// Owned by the worker (Run's goroutine).
	handlers     map[string]handler
	kinds        map[string]*watchedKind
	converted    map[types.UID]convertedConfig
	derived      *derivedCache
	version      uint64
	lastProblems map[string]bool
	// conflicts are the published snapshot's build problems by object.
	conflicts map[objectRef][]validationMessage
	mesh      *meshconfig.Config
	// gwDecoded caches the typed Gateway API objects by UID; gwStatus is
	// the last translation's statuses (gatewayapi.go).
	gwDecoded map[types.UID]decodedObject
	gwStatus  map[objectRef]wantedStatus
	// gwConfigs are the keys of the last translation's configs, logged
	// when they change.
	gwConfigs []string
	// gwSecrets are the Secrets (namespace/name) the last translation's
	// Gateways name as certificates, with the namespaces of those
	// Gateways: a change of one translates again (onSecret).
	gwSecrets map[string][]string
	// deployer deploys the gateways of the Gateway API Gateways (leader
	// only: gatewaydeploy.go); safe for concurrent use.
	deployer *gatewayDeployer
}

// New creates the clients and informers; nothing talks to the API server
// until Run. Until Run has synced, Snapshot serves only opts.Static.
func New(opts Options) (*Registry, error) {
	if opts.Config == nil {
		return nil, errors.New("kube registry: no API server config (--kubeconfig or in-cluster)")
	}
	if opts.Domain == "" {
		opts.Domain = mesh.DefaultDomain
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if v := reflect.ValueOf(opts.Static); v.Kind() == reflect.Pointer && v.IsNil() {
		opts.Static = nil // a nil *file.Registry: no static source
	}
	cfg := rest.CopyConfig(opts.Config)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "straitd"
	}
	// Built-in kinds travel as protobuf: decoding the initial lists costs
	// a fraction of the CPU and garbage of JSON. Istio's kinds and CRDs
	// (the other clients) only speak JSON.
	protoCfg := rest.CopyConfig(cfg)
	protoCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	protoCfg.ContentType = "application/vnd.kubernetes.protobuf"
	core, err := corev1client.NewForConfig(protoCfg)
	if err != nil {
		return nil, fmt.Errorf("kube registry: %w", err)
	}
	disc, err := discoveryv1client.NewForConfig(protoCfg)
	if err != nil {
		return nil, fmt.Errorf("kube registry: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube registry: %w", err)
	}
	// The status writer has a client (and so a client-side rate limiter)
	// of its own: a backlog of status writes must not hold up the
	// informers' lists.
	statusClient, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube registry: %w", err)
	}
	authz, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube registry: %w", err)
	}
	r := &Registry{
		opts:          opts,
		log:           opts.Logger.With("component", "mesh.kube"),
		core:          core,
		queue:         newQueue(),
		status:        newStatusWriter(statusClient, opts.Logger.With("component", "mesh.kube.status")),
		coreInformers: &informerSet{},
		dynFactory:    dynamicinformer.NewDynamicSharedInformerFactory(dc, 0),
		syncedCh:      make(chan struct{}),
		kinds:         map[string]*watchedKind{},
		converted:     map[types.UID]convertedConfig{},
		derived:       newDerivedCache(),
		mesh:          opts.Mesh,
		gwDecoded:     map[types.UID]decodedObject{},
		deployer:      newGatewayDeployer(statusClient, opts.Logger.With("component", "mesh.kube.gateway-deployer")),
		reviewer:      newSecretReviewer(authz.SubjectAccessReviews()),
	}
	r.services = r.coreInformers.add(core.RESTClient(), "services", &corev1.Service{})
	r.slices = r.coreInformers.add(disc.RESTClient(), "endpointslices", &discoveryv1.EndpointSlice{})
	r.pods = r.coreInformers.add(core.RESTClient(), "pods", &corev1.Pod{})
	r.namespaces = r.coreInformers.add(core.RESTClient(), "namespaces", &corev1.Namespace{})
	nodes := r.coreInformers.add(core.RESTClient(), "nodes", &corev1.Node{})
	r.secrets = r.coreInformers.addSelected(core.RESTClient(), "secrets", &corev1.Secret{}, secretFieldSelector())
	if err := r.secrets.SetTransform(stripSecret); err != nil {
		return nil, fmt.Errorf("kube registry: %w", err)
	}
	r.derived.nodeLocality = func(name string) string {
		obj, ok, _ := nodes.GetStore().GetByKey(name)
		if !ok {
			return ""
		}
		return nodeLocality(obj.(*corev1.Node))
	}
	r.crds = r.dynFactory.ForResource(CRDResource).Informer()
	if err := r.crds.SetTransform(stripCRD); err != nil {
		return nil, fmt.Errorf("kube registry: %w", err)
	}
	if err := r.pods.AddIndexers(cache.Indexers{podIPIndex: indexPodIPs}); err != nil {
		return nil, err
	}
	if err := r.slices.AddIndexers(cache.Indexers{sliceSvcIndex: indexSliceService}); err != nil {
		return nil, err
	}
	// Steps (3) and (4) of kind discovery for the built-in kinds: the informer, and callbacks that
	// only enqueue.
	r.handlers = map[string]handler{
		kindService:       r.onService,
		kindEndpointSlice: r.onEndpointSlice,
		kindPod:           r.onPod,
		kindNamespace:     r.onNamespace,
		kindNode:          r.onNode,
		kindCRD:           r.onCRD,
		kindSecretEvent:   r.onSecret,
		kindSynced:        r.onKindSynced,
		kindStatic:        r.onStatic,
		kindMesh:          r.onMesh,
	}
	for kind, inf := range map[string]cache.SharedIndexInformer{
		kindService: r.services, kindEndpointSlice: r.slices, kindPod: r.pods,
		kindNamespace: r.namespaces, kindNode: nodes, kindCRD: r.crds, kindSecretEvent: r.secrets,
	} {
		reg, err := inf.AddEventHandler(r.queue.handlerFor(kind))
		if err != nil {
			return nil, fmt.Errorf("kube registry: %s handler: %w", kind, err)
		}
		r.coreSynced = append(r.coreSynced, reg.HasSynced)
	}
	r.publish(r.buildStore(), false)
	return r, nil
}

// Snapshot returns the current snapshot; never nil, never modified.
func (r *Registry) Snapshot() *mesh.Snapshot { return r.snap.Load() }

// HasSynced reports whether the snapshot holds the cluster's objects (the
// informers' first lists are in).
func (r *Registry) HasSynced() bool {
	select {
	case <-r.syncedCh:
		return true
	default:
		return false
	}
}

// WaitForSync waits until HasSynced or ctx is done.
func (r *Registry) WaitForSync(ctx context.Context) error {
	select {
	case <-r.syncedCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kube registry: not synced with the API server: %w", ctx.Err())
	}
}

// WatchedKinds returns the CRD-backed kinds ("GROUP/Kind") whose informers
// run and whose CRD is installed, sorted.
func (r *Registry) WatchedKinds() []string {
	r.kindsMu.Lock()
	defer r.kindsMu.Unlock()
	return slices.Clone(r.kindsView)
}

// WriteStatus writes, until ctx is done, the status of the Istio objects
// of the kinds Strait translates: an object refused (a field Strait does
// not support yet) or rejected (invalid) gets one validation message per
// problem on status.validationMessages (level ERROR, code CodeNotSupported
// or CodeInvalid, type.name the text of the log line), and loses them once
// it is served. Only one straitd of several may write: call it from
// RunAsLeader. It needs Run to be running (it reads the informers' caches),
// never holds up the snapshot, and a failed write is logged once per
// object and reason. It returns nil when ctx is done.
//
// With Options.GatewayAPI it writes the Gateway API objects' status too:
// the conditions istiod writes on the GatewayClasses, Gateways and routes
// of its controller (gatewayapi.go).
func (r *Registry) WriteStatus(ctx context.Context) error {
	return r.status.run(ctx)
}

// DeployGateways deploys, until ctx is done, the gateway of each Gateway
// API Gateway of class istio, as istiod does (gatewaydeploy.go): only
// one straitd of several may, so call it from RunAsLeader. It needs Run
// to be running; without Options.GatewayAPI it only waits for ctx. It
// returns nil when ctx is done.
func (r *Registry) DeployGateways(ctx context.Context) error {
	if !r.opts.GatewayAPI {
		<-ctx.Done()
		return nil
	}
	return r.deployer.run(ctx)
}

// SetMesh replaces the mesh config: the worker rebuilds the snapshot with
// it and asks for a full push of every proxy. Safe from any goroutine.
func (r *Registry) SetMesh(m *meshconfig.Config) {
	r.queue.push(event{kind: kindMesh, obj: m})
}

// StaticChanged tells the registry that Options.Static published a new
// snapshot; req (the static source's push request) is forwarded to
// onChange after the merged snapshot is rebuilt. Pass it as the file
// registry's onChange.
func (r *Registry) StaticChanged(req *proxypush.PushRequest) {
	if req == nil {
		req = &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}}
	}
	r.queue.push(event{kind: kindStatic, obj: req})
}

// Run starts the informers, waits for their first lists, publishes the
// first snapshot and calls onChange with a full push, then processes
// events until ctx is done (it returns nil then). After every batch of
// events that changed the service model it publishes a new snapshot and
// calls onChange (on Run's goroutine) with the merged push request. An
// unreachable API server is not an error: the informers retry, and the
// last snapshot is served meanwhile. Run must be called at most once.
func (r *Registry) Run(ctx context.Context, onChange func(*proxypush.PushRequest)) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("kube registry: Run called twice")
	}
	if onChange == nil {
		onChange = func(*proxypush.PushRequest) {}
	}
	r.coreInformers.Start(ctx.Done())
	r.dynFactory.Start(ctx.Done())
	defer r.shutdown()
	start := time.Now()
	r.log.Info("waiting for the API server's lists", "host", r.opts.Config.Host)
	if !cache.WaitForCacheSync(ctx.Done(), r.coreSynced...) {
		return nil
	}
	// Kind discovery steps (1) and (2): the CRDs present now, filtered to
	// the kinds of interest; (3) and (4) happen in onCRD. Later CRDs arrive as events.
	for _, obj := range r.crds.GetStore().List() {
		r.onCRD(ctx, event{kind: kindCRD, typ: eventAdd, obj: obj})
	}
	r.logUnavailable()
	// A kind that cannot be listed (e.g. RBAC forbids it) must not keep
	// the Services from being served: after kindSyncTimeout the others go
	// ahead, and the late kind joins when it has synced.
	var synced []cache.InformerSynced
	for _, k := range r.kinds {
		synced = append(synced, k.registration.HasSynced)
	}
	kindCtx, cancelKinds := context.WithTimeout(ctx, kindSyncTimeout)
	cache.WaitForCacheSync(kindCtx.Done(), synced...)
	cancelKinds()
	if ctx.Err() != nil {
		return nil
	}
	for key, k := range r.kinds {
		if k.registration.HasSynced() {
			k.synced = true
			continue
		}
		r.log.Warn("kind not listed yet; serving without it until it is", "kind", key)
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), k.registration.HasSynced) {
				r.queue.push(event{kind: kindSynced, obj: key})
			}
		}()
	}
	r.updateKindsView()
	r.publish(r.buildStore(), true)
	close(r.syncedCh)
	r.log.Info("synced with the API server", "took", time.Since(start).Round(time.Millisecond),
		"services", len(r.services.GetStore().ListKeys()), "kinds", r.WatchedKinds())
	onChange(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.GlobalUpdate}, Start: start})

	for {
		evs := r.queue.take(ctx)
		if evs == nil {
			return nil
		}
		var batch proxypush.Batch
		global := false // a request that names nothing concerns every proxy
		for _, ev := range evs {
			h := r.handlers[ev.kind]
			if h == nil {
				continue
			}
			if hr := h(ctx, ev); hr != nil {
				if hr.Start.IsZero() {
					hr.Start = ev.at
				}
				global = global || hr.IsGlobal()
				batch.Add(hr)
			}
		}
		req := batch.Request()
		if req == nil {
			continue
		}
		if old, changed, ok := r.updateEndpoints(evs); ok {
			if len(changed) > 0 || global {
				req.ConfigsUpdated = unionKeys(req.ConfigsUpdated, changed)
				onChange(describe(old, r.Snapshot(), req, changed, global))
			}
			continue
		}
		old := r.Snapshot()
		store := r.buildStore()
		changed := istioconfig.Diff(old.Configs, store)
		if len(changed) == 0 && !global && !namesOtherKinds(req) {
			// The service model is a function of the store: nothing to push
			// (e.g. a relist after an outage, or the start-up backlog). An
			// object still not served may say something new on its status.
			r.reportStatus()
			continue
		}
		r.publish(store, true)
		req.ConfigsUpdated = unionKeys(req.ConfigsUpdated, changed)
		onChange(describe(old, r.Snapshot(), req, changed, global))
	}
}

// namesOtherKinds reports whether req names a config of a kind that is not
// part of the service model (an Istio kind Strait watches but does not
// translate yet): such changes are pushed even though the store is equal.
func namesOtherKinds(req *proxypush.PushRequest) bool {
	for k := range req.ConfigsUpdated {
		if !slices.Contains(istioconfig.Kinds, k.Kind) {
			return true
		}
	}
	return false
}

func unionKeys(a, b map[proxypush.ConfigKey]struct{}) map[proxypush.ConfigKey]struct{} {
	out := make(map[proxypush.ConfigKey]struct{}, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// describe completes a batch's push request with what the change concerns,
// as the file registry does (mesh.PushRequestFor): the hosts whose
// service or endpoints changed and the addresses whose inbound side
// changed, so that the xDS server can push only to dependent proxies. The
// handlers' decisions stand: a full push stays full, the reasons are
// theirs, and a batch with a request that named nothing stays global.
//
// A workload whose labels changed (a pod's, found in the store diff rather
// than trusted to the event that reported it: a batch may already see an
// object whose event comes in the next one) makes the push full, for that
// workload's own proxy.
func describe(old, new *mesh.Snapshot, req *proxypush.PushRequest, changed map[proxypush.ConfigKey]struct{}, global bool) *proxypush.PushRequest {
	out := mesh.PushRequestFor(old, new, req.ConfigsUpdated, req.Start).Merge(req)
	out.Reason = req.Reason
	for k := range changed {
		if k.Kind != istioconfig.KindWorkloadEntry {
			continue
		}
		o, n := old.Configs.Get(k), new.Configs.Get(k)
		if o != nil && n != nil && !maps.Equal(o.WorkloadEntry().GetLabels(), n.WorkloadEntry().GetLabels()) {
			out.Full = true
			if !slices.Contains(out.Reason, proxypush.ProxyUpdate) {
				out.Reason = append(slices.Clone(out.Reason), proxypush.ProxyUpdate)
			}
		}
	}
	if global {
		out.ConfigsUpdated, out.ServicesUpdated, out.AddressesUpdated = nil, nil, nil
	}
	return out
}

// shutdown stops the informers once ctx is done.
func (r *Registry) shutdown() {
	r.coreInformers.Shutdown()
	r.dynFactory.Shutdown()
}

// logUnavailable logs the expected kinds whose CRDs are not installed.
func (r *Registry) logUnavailable() {
	var missing []string
	for _, k := range ExpectedIstioKinds {
		if w := r.kinds[k]; w == nil || !w.installed {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		r.log.Warn("no CRDs for these Istio kinds yet; they are picked up when installed", "kinds", missing)
	}
	if r.opts.GatewayAPI {
		n := 0
		for k, w := range r.kinds {
			if strings.HasPrefix(k, GatewayAPIGroup+"/") && w.installed {
				n++
			}
		}
		if n == 0 {
			r.log.Warn("no CRDs for the Gateway API kinds; they are not watched", "group", GatewayAPIGroup)
		}
	}
}

func (r *Registry) updateKindsView() {
	var view []string
	for k, w := range r.kinds {
		if w.installed && w.synced {
			view = append(view, k)
		}
	}
	slices.Sort(view)
	r.kindsMu.Lock()
	r.kindsView = view
	r.kindsMu.Unlock()
}

func indexPodIPs(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.HostNetwork {
		return nil, nil
	}
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	return ips, nil
}

func indexSliceService(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[serviceNameKey] == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Labels[serviceNameKey]}, nil
}

// sortedKeys is for logs.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
