package main

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/install"
)

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
	out, err := install.Render(c, install.RenderOptions{Namespace: namespace, Values: vals})
	if err == nil {
		return out, nil
	}
	// Helm's schema error names the key, not where it came from: with
	// several -f files, name the first one that is refused on its own.
	if len(r.valueFiles) > 0 {
		for _, f := range r.valueFiles {
			one, ferr := install.MergeValues([]string{f}, nil, nil)
			if ferr != nil {
				continue
			}
			if _, ferr := install.Render(c, install.RenderOptions{Namespace: namespace, Values: one}); ferr != nil {
				return install.Rendered{}, fmt.Errorf("values file %s: %s", f, strings.TrimSpace(strings.TrimPrefix(ferr.Error(), "values: ")))
			}
		}
	}
	// Helm's schema error ends in a newline.
	return install.Rendered{}, errors.New(strings.TrimSpace(err.Error()))
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
--set global.defaultPodDisruptionBudget.enabled=false). It then waits
until the straitd Deployment is available, printing its progress.

Values use Istio's names (global.hub, global.tag, global.proxy.image,
pilot.*, sidecarInjectorWebhook.*, meshConfig.*); an unknown key is
refused with its name. --dry-run prints the manifests without contacting
a cluster; they do not include the namespace, which install creates when
it is missing.`,
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
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cfg, err := kube.connect(ctx)
			if err != nil {
				return err
			}
			c, err := install.NewClient(cfg, out)
			if err != nil {
				return err
			}
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
			fmt.Fprintln(out, "inject a namespace's new pods: kubectl label namespace NAME istio-injection=enabled")
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
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cfg, err := kube.connect(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			c, err := install.NewClient(cfg, out)
			if err != nil {
				return err
			}
			deleted, err := c.Uninstall(ctx, r, install.UninstallOptions{Namespace: kube.namespace, Release: install.DefaultRelease, Purge: purge})
			if err != nil {
				return err
			}
			if len(deleted) == 0 {
				crds := " (the CRDs aside: --purge deletes them)"
				if purge {
					crds = ""
				}
				fmt.Fprintf(out, "nothing to uninstall: no object labelled %s=%s,%s=%s in namespace %s or cluster-wide%s\n",
					install.InstanceLabel, install.DefaultRelease, install.PartOfLabel, install.PartOfValue, kube.namespace, crds)
				return nil
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
