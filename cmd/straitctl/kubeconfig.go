package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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

// reachTimeout bounds connect's first request: a server that does not
// answer is reported instead of waited on for each of the requests that
// follow.
const reachTimeout = 20 * time.Second

// connect loads the kubeconfig and checks that its cluster answers and
// takes its credentials, so that a missing kubeconfig, an unknown
// context, a cluster that is down and expired credentials each fail
// first, with a message that names the kubeconfig file, the context and
// the server, rather than as the failure of whichever object came first.
func (k *kubeFlags) connect(ctx context.Context) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	if k.kubeconfig != "" {
		if _, err := os.Stat(k.kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", k.kubeconfig, err)
		}
	}
	files := kubeconfigFiles(rules)
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", files, err)
	}
	if len(raw.Contexts) == 0 && len(raw.Clusters) == 0 {
		return nil, fmt.Errorf("no kubeconfig: %s (give --kubeconfig FILE or set KUBECONFIG to your cluster's kubeconfig)", missingKubeconfig(rules))
	}
	ctxName := raw.CurrentContext
	if k.context != "" {
		ctxName = k.context
	}
	if _, ok := raw.Contexts[ctxName]; !ok {
		var names []string
		for n := range raw.Contexts {
			names = append(names, n)
		}
		slices.Sort(names)
		if ctxName == "" {
			return nil, fmt.Errorf("kubeconfig %s has no current context: choose one with --context (it has %s)", files, strings.Join(names, ", "))
		}
		return nil, fmt.Errorf("kubeconfig %s has no context %q: choose one with --context (it has %s)", files, ctxName, strings.Join(names, ", "))
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s, context %s: %w", files, ctxName, err)
	}
	where := fmt.Sprintf("the API server %s (context %s of kubeconfig %s)", cfg.Host, ctxName, files)

	probe := rest.CopyConfig(cfg)
	probe.Timeout = reachTimeout
	disc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	// The first request: /version needs no permission but does check
	// the credentials.
	if _, err := disc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		switch {
		case apierrors.IsUnauthorized(err):
			return nil, fmt.Errorf("%s refused the credentials: %w (log in again, or choose another context with --context)", where, err)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			return nil, fmt.Errorf("cannot reach %s: %w (is the cluster running, and is this the kubeconfig you meant?)", where, err)
		}
	}
	return cfg, nil
}

// kubeconfigFiles names the files the loading rules read: the
// --kubeconfig file, or those of $KUBECONFIG or ~/.kube/config that
// exist.
func kubeconfigFiles(rules *clientcmd.ClientConfigLoadingRules) string {
	var have []string
	for _, f := range rules.GetLoadingPrecedence() {
		if _, err := os.Stat(f); err == nil {
			have = append(have, f)
		}
	}
	if len(have) == 0 {
		return "(none)"
	}
	return strings.Join(have, string(os.PathListSeparator))
}

// missingKubeconfig says where a kubeconfig was looked for.
func missingKubeconfig(rules *clientcmd.ClientConfigLoadingRules) string {
	looked := rules.GetLoadingPrecedence()
	if len(looked) == 0 {
		return "no kubeconfig file to read"
	}
	var missing []string
	for _, f := range looked {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, f)
		}
	}
	if len(missing) == len(looked) {
		return "looked for " + strings.Join(looked, ", ") + ": not found"
	}
	return strings.Join(looked, ", ") + ": no cluster and no context in it"
}
