package kube

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// KeepCABundle keeps every webhook of the MutatingWebhookConfiguration
// name trusting bundle, until ctx ends (leadership lost or shutdown). A
// missing configuration is waited for, not created.
func KeepCABundle(ctx context.Context, cfg *rest.Config, name string, bundle []byte, logger *slog.Logger) error {
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
			log.Warn("cannot write the webhook CA bundle; will retry", "error", err)
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
