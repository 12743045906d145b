// Package kube is the injector's Kubernetes side: it keeps an Injector's
// settings in step with the istio-sidecar-injector ConfigMap, and keeps the
// MutatingWebhookConfiguration trusting the webhook server's CA.
package kube
