package main

import (
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/install"
)

// kubeFlags select the cluster.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func (k *kubeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&k.context, "context", "", "kubeconfig context (default the current one)")
	cmd.Flags().StringVarP(&k.namespace, "namespace", "n", install.DefaultNamespace, "the control plane's namespace")
}

func (k *kubeFlags) config() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w (give --kubeconfig FILE or set KUBECONFIG)", err)
	}
	return cfg, nil
}

// renderFlags are the chart values, as helm takes them.
type renderFlags struct {
	valueFiles, sets, setStrings []string
}

func (r *renderFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&r.valueFiles, "values", "f", nil, "values file (YAML) laid over the chart's defaults; repeatable, later files win")
	cmd.Flags().StringArrayVar(&r.sets, "set", nil, "value KEY=VALUE (e.g. global.hub=registry.example.com/strait); repeatable, applied after -f")
	cmd.Flags().StringArrayVar(&r.setStrings, "set-string", nil, "value KEY=VALUE kept as a string (e.g. global.tag=1.20); repeatable, applied after --set")
}

func (r *renderFlags) render(namespace string) (install.Rendered, error) {
	vals, err := install.MergeValues(r.valueFiles, r.sets, r.setStrings)
	if err != nil {
		return install.Rendered{}, err
	}
	c, err := install.LoadChart()
	if err != nil {
		return install.Rendered{}, err
	}
	return install.Render(c, install.RenderOptions{Namespace: namespace, Values: vals})
}

func newInstallCmd() *cobra.Command {
	var (
		kube    kubeFlags
		values  renderFlags
		wait    bool
		timeout time.Duration
		dryRun  bool
	)
	cmd := &cobra.Command{
		Use:   "install [-f values.yaml] [--set KEY=VALUE]",
		Short: "Install or upgrade Strait (straitd, the Istio CRDs, the injection webhook) in a cluster",
		Long: `install renders Strait's Helm chart (the same chart as manifests/charts/strait,
built into straitctl) with its defaults, -f files and --set values, and
applies it with server-side apply (field manager "straitctl"): running it
again upgrades in place, and deletes the objects the new values no longer
render (e.g. the PodDisruptionBudget after
--set global.defaultPodDisruptionBudget.enabled=false). It then waits until the straitd Deployment is
available. Values use Istio's names (global.hub, global.tag,
global.proxy.image, pilot.*, sidecarInjectorWebhook.*, meshConfig.*); an
unknown key is refused with its name.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := values.render(kube.namespace)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if dryRun {
				return printManifests(out, r)
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %v: want a positive duration (e.g. 5m)", timeout)
			}
			cfg, err := kube.config()
			if err != nil {
				return err
			}
			c, err := install.NewClient(cfg, out)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := c.Apply(ctx, r, kube.namespace); err != nil {
				return err
			}
			// An upgrade removes what the new values no longer render.
			kinds, err := (&renderFlags{}).render(kube.namespace)
			if err != nil {
				return err
			}
			if _, err := c.Prune(ctx, kinds, r, install.UninstallOptions{Namespace: kube.namespace, Release: install.DefaultRelease}); err != nil {
				return err
			}
			if !wait {
				fmt.Fprintf(out, "installed in %s; not waiting for straitd (--wait=false)\n", kube.namespace)
				return nil
			}
			if err := c.Wait(ctx, kube.namespace, timeout); err != nil {
				return err
			}
			fmt.Fprintf(out, "installed in %s; straitd is available\n", kube.namespace)
			return nil
		},
	}
	kube.add(cmd)
	values.add(cmd)
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the straitd Deployment is available")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the manifests instead of applying them")
	return cmd
}

func newUninstallCmd() *cobra.Command {
	var (
		kube  kubeFlags
		purge bool
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what straitctl install created",
		Long: `uninstall deletes every object of the chart's kinds labelled
app.kubernetes.io/instance=strait and app.kubernetes.io/part-of=strait:
straitd, its Service, RBAC, ConfigMaps and the webhook. The Istio CRDs
stay unless --purge is given: deleting them deletes every Istio resource
(VirtualService, DestinationRule, ...) in the cluster. The namespace stays,
and so do the istio-ca-root-cert ConfigMaps straitd wrote into namespaces.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var values renderFlags
			r, err := values.render(kube.namespace)
			if err != nil {
				return err
			}
			cfg, err := kube.config()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			c, err := install.NewClient(cfg, out)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			deleted, err := c.Uninstall(ctx, r, install.UninstallOptions{Namespace: kube.namespace, Release: install.DefaultRelease, Purge: purge})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "uninstalled: %d objects deleted\n", len(deleted))
			return nil
		},
	}
	kube.add(cmd)
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the Istio CRDs, and with them every Istio resource in the cluster")
	return cmd
}

func printManifests(w io.Writer, r install.Rendered) error {
	for _, o := range r.All() {
		if err := printObject(w, o); err != nil {
			return err
		}
	}
	return nil
}

func printObject(w io.Writer, o *unstructured.Unstructured) error {
	b, err := yaml.Marshal(o.Object)
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	_, err = fmt.Fprintf(w, "---\n%s", b)
	return err
}
