package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"k8s.io/client-go/rest"

	"github.com/straitmesh/strait/internal/inject"
	injectkube "github.com/straitmesh/strait/internal/inject/kube"
	"github.com/straitmesh/strait/internal/lifecycle"
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
	// statusLeaseName is the Lease straitd replicas elect the writer of
	// the Istio objects' status with.
	statusLeaseName = "strait-status"
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
// Kubernetes mode the CA bundle writer, each a part of parts.
func startInjector(ctx context.Context, f flags, cfg *rest.Config, logger *slog.Logger, parts *lifecycle.Group) error {
	log := logger.With("component", "straitd")
	var meshProto *meshv1alpha1.MeshConfig
	if f.mesh != nil {
		meshProto = f.mesh.Mesh
	}
	defaults, err := inject.NewSettings(nil, nil, meshProto)
	if err != nil {
		return err
	}
	inj := inject.New(defaults, inject.Options{ControlPlaneNamespace: f.namespace, Logger: logger})
	switch {
	case f.injectConfigDir != "" && inject.HasConfigFiles(f.injectConfigDir):
		// Load once here so a broken file fails the start clearly.
		s, err := inject.LoadDir(f.injectConfigDir, meshProto)
		if err != nil {
			return fmt.Errorf("--inject-config-dir: %w", err)
		}
		inj.Update(s)
		parts.Go("inject config watcher", func(ctx context.Context) error {
			return inject.WatchDir(ctx, f.injectConfigDir, inj, meshProto, logger)
		})
	case cfg != nil:
		parts.Go("injector ConfigMap", func(ctx context.Context) error {
			return injectkube.WatchConfigMap(ctx, cfg, f.namespace, injectorConfigMapName, inj, logger)
		})
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
	parts.Go("inject webhook server", func(ctx context.Context) error { return srv.Serve(ctx, ln) })

	if cfg != nil && f.webhookCert == "" && f.webhookConfigName != "" {
		bundle := srv.CABundle()
		parts.Go("webhook CA bundle", func(ctx context.Context) error {
			return kube.RunAsLeader(ctx, kube.LeaderOptions{
				Config: cfg, Namespace: f.namespace, Name: webhookLeaseName, Logger: logger,
			}, func(ctx context.Context) {
				if err := injectkube.KeepCABundle(ctx, cfg, f.webhookConfigName, bundle, logger); err != nil {
					log.Error("webhook CA bundle", "error", err)
				}
			})
		})
	}
	return nil
}
