package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/straitmesh/strait/internal/inject"
	"github.com/straitmesh/strait/internal/registry/kube"
)

// Defaults of the Kubernetes-mode and webhook flags.
const (
	defaultNamespace         = "istio-system"
	defaultWebhookConfigName = "istio-sidecar-injector"
	// injectorConfigMapName is the ConfigMap the injector reads (keys
	// "config" and "values") when --inject-config-dir has no files.
	injectorConfigMapName = "istio-sidecar-injector"
	// webhookLeaseName is the Lease straitd replicas elect the writer of
	// the webhook CA bundle with.
	webhookLeaseName = "strait-webhook-ca"
)

// gatewayAPIFromEnv reads PILOT_ENABLE_GATEWAY_API (default true).
func gatewayAPIFromEnv(lookup func(string) (string, bool)) (bool, error) {
	v, ok := lookup("PILOT_ENABLE_GATEWAY_API")
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("environment variable PILOT_ENABLE_GATEWAY_API=%q is not a boolean (\"true\" or \"false\")", v)
	}
	return b, nil
}

// resolveMode decides between file and Kubernetes mode: --kubeconfig, or
// in a pod (KUBERNETES_SERVICE_HOST) when neither --config-dir nor
// --kubeconfig is given, is Kubernetes mode.
func resolveMode(f *flags, lookup func(string) (string, bool)) error {
	if f.kubeconfig != "" {
		f.kubeMode = true
	} else if f.configDir == "" {
		if v, ok := lookup("KUBERNETES_SERVICE_HOST"); ok && v != "" {
			f.kubeMode = true
		}
	}
	if !f.kubeMode && f.configDir == "" {
		return errors.New("--config-dir is required in file mode: give --config-dir DIR (a directory of Istio YAML to serve), " +
			"or --kubeconfig FILE to read the mesh from a Kubernetes API server (in a pod, the in-cluster config is used without either)")
	}
	if f.kubeMode {
		g, err := gatewayAPIFromEnv(lookup)
		if err != nil {
			return err
		}
		f.gatewayAPI = g
	}
	// The webhook is on by default in Kubernetes mode; in file mode only
	// when --inject-addr is given.
	if !f.kubeMode && !f.injectAddrSet && f.injectLis == nil {
		f.injectAddr = ""
	}
	return nil
}

// startInjector wires the sidecar injection webhook: its settings (from
// --inject-config-dir, else the istio-sidecar-injector ConfigMap in
// Kubernetes mode, else the shipped defaults), its HTTPS server, and in
// Kubernetes mode the CA bundle writer. part starts a goroutine.
func startInjector(ctx context.Context, f flags, cfg *rest.Config, logger *slog.Logger, part func(string, func() error)) error {
	log := logger.With("component", "straitd")
	inj := inject.New(nil, inject.Options{ControlPlaneNamespace: f.namespace, Logger: logger})
	switch {
	case f.injectConfigDir != "" && inject.HasConfigFiles(f.injectConfigDir):
		// Load once here so a broken file fails the start clearly.
		s, err := inject.LoadDir(f.injectConfigDir, nil)
		if err != nil {
			return fmt.Errorf("--inject-config-dir: %w", err)
		}
		inj.Update(s)
		part("inject config watcher", func() error {
			return inject.WatchDir(ctx, f.injectConfigDir, inj, nil, logger)
		})
	case cfg != nil:
		if err := watchInjectorConfigMap(ctx, cfg, f.namespace, inj, logger); err != nil {
			return err
		}
	default:
		log.Info("injector uses the shipped template and values", "config_dir", f.injectConfigDir)
	}

	srv, err := inject.NewServer(inject.NewWebhookHandler(inj, logger), inject.ServerOptions{
		Addr:     f.injectAddr,
		CertFile: f.webhookCert,
		KeyFile:  f.webhookKey,
		DNSNames: inject.ServiceDNSNames(f.namespace),
		Logger:   logger,
	})
	if err != nil {
		return err
	}
	ln := f.injectLis
	if ln == nil {
		if ln, err = net.Listen("tcp", f.injectAddr); err != nil {
			return fmt.Errorf("--inject-addr: %w", err)
		}
	}
	part("inject webhook server", func() error { return srv.Serve(ctx, ln) })

	if cfg != nil && f.webhookCert == "" && f.webhookConfigName != "" {
		bundle := srv.CABundle()
		part("webhook CA bundle", func() error {
			return kube.RunAsLeader(ctx, kube.LeaderOptions{
				Config: cfg, Namespace: f.namespace, Name: webhookLeaseName, Logger: logger,
			}, func(ctx context.Context) {
				if err := patchWebhookCABundle(ctx, cfg, f.webhookConfigName, bundle, logger); err != nil {
					log.Error("webhook CA bundle", "err", err)
				}
			})
		})
	}
	return nil
}

// watchInjectorConfigMap keeps inj's settings in step with the
// istio-sidecar-injector ConfigMap in namespace until ctx ends. A ConfigMap
// that does not parse is logged and the previous settings stay; a deleted
// one brings back the shipped defaults.
func watchInjectorConfigMap(ctx context.Context, cfg *rest.Config, namespace string, inj *inject.Injector, logger *slog.Logger) error {
	log := logger.With("component", "inject-config", "configmap", namespace+"/"+injectorConfigMapName)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	informer := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(core.RESTClient(), "configmaps", namespace, fields.OneTermEqualSelector("metadata.name", injectorConfigMapName)),
		&corev1.ConfigMap{}, 0, cache.Indexers{})
	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != injectorConfigMapName {
			return
		}
		s, err := inject.SettingsFromConfigMap(cm.Data, nil)
		if err != nil {
			log.Error("injector config not applied; keeping the previous one", "err", err)
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
	go informer.Run(ctx.Done())
	return nil
}

// patchWebhookCABundle keeps every webhook of the MutatingWebhookConfiguration
// name trusting bundle, until ctx ends (leadership lost or shutdown). A
// missing configuration is waited for, not created.
func patchWebhookCABundle(ctx context.Context, cfg *rest.Config, name string, bundle []byte, logger *slog.Logger) error {
	log := logger.With("component", "webhook-ca", "mutatingwebhookconfiguration", name)
	admission, err := admissionregistrationv1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mwcs := admission.MutatingWebhookConfigurations()
	sync := func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mwc, err := mwcs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !needsBundle(mwc, bundle) {
				return nil
			}
			for i := range mwc.Webhooks {
				mwc.Webhooks[i].ClientConfig.CABundle = bundle
			}
			_, err = mwcs.Update(ctx, mwc, metav1.UpdateOptions{})
			if err == nil {
				log.Info("wrote the webhook CA bundle", "webhooks", len(mwc.Webhooks))
			}
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			log.Warn("cannot write the webhook CA bundle; will retry", "err", err)
		}
	}
	informer := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(admission.RESTClient(), "mutatingwebhookconfigurations", "", fields.OneTermEqualSelector("metadata.name", name)),
		&admissionregistrationv1.MutatingWebhookConfiguration{}, 0, cache.Indexers{})
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, obj any) { poke(obj) },
	})
	if err != nil {
		return err
	}
	stopped := make(chan struct{})
	go func() { informer.Run(ctx.Done()); close(stopped) }()
	defer func() { <-stopped }()
	// A periodic resync retries failed writes.
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			sync()
		case <-tick.C:
			sync()
		}
	}
}

// needsBundle reports whether a webhook of mwc does not trust bundle yet.
func needsBundle(mwc *admissionregistrationv1.MutatingWebhookConfiguration, bundle []byte) bool {
	for _, w := range mwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			return true
		}
	}
	return false
}
