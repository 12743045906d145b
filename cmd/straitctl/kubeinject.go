package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/straitmesh/strait/internal/inject"
	"github.com/straitmesh/strait/internal/meshconfig"
)

// kubeInjectFlags are `straitctl kube-inject`'s flags.
type kubeInjectFlags struct {
	filename         string
	output           string
	injectConfigFile string
	valuesFile       string
	meshConfigFile   string
	revision         string
}

func newKubeInjectCmd() *cobra.Command {
	var f kubeInjectFlags
	cmd := &cobra.Command{
		Use:   "kube-inject -f FILE|-",
		Short: "Inject the Strait sidecar into Kubernetes YAML",
		Long: `kube-inject adds the sidecar (the istio-init capture step and the
istio-proxy agent) to every Pod and to the pod template of every
Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job
and CronJob in the input, including items of a List. Other documents are
written unchanged. The result is YAML, one document per input document.

Without --injectConfigFile, --valuesFile or --meshConfigFile the injector
configuration shipped with Strait is used. Each file may also be a
ConfigMap manifest (istio-sidecar-injector's config/values keys, istio's
mesh key).`,
		Example: `  straitctl kube-inject -f nginx.yaml
  kubectl get deploy web -o yaml | straitctl kube-inject -f - | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKubeInject(cmd.InOrStdin(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.filename, "filename", "f", "", `input file ("-" for standard input)`)
	fl.StringVarP(&f.output, "output", "o", "", "output file (default standard output)")
	fl.StringVar(&f.injectConfigFile, "injectConfigFile", "", "injector configuration (policy, templates, selectors)")
	fl.StringVar(&f.valuesFile, "valuesFile", "", "injector values (global.proxy.image, resources, …)")
	fl.StringVar(&f.meshConfigFile, "meshConfigFile", "", "mesh configuration (MeshConfig YAML)")
	fl.StringVar(&f.revision, "revision", "", "control plane revision to record in the status annotation")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// maxKubeInjectInput bounds kube-inject's whole input: the output is held
// until every document has been injected, so that a failure part way
// never leaves half a manifest in a file or on a pipe into kubectl apply.
const maxKubeInjectInput = 64 << 20

func runKubeInject(stdin io.Reader, stdout io.Writer, f kubeInjectFlags) error {
	settings, err := kubeInjectSettings(f)
	if err != nil {
		return err
	}
	name, in := "-", stdin
	if f.filename != "-" {
		file, err := os.Open(f.filename)
		if err != nil {
			return err
		}
		defer file.Close()
		name, in = f.filename, file
	}
	limited := &limitedReader{r: in, left: maxKubeInjectInput}
	var out bytes.Buffer
	inj := inject.New(settings, inject.Options{Revision: f.revision})
	if err := inj.IntoResourceFile(limited, &out); err != nil {
		if limited.over {
			return fmt.Errorf("%s: larger than %d MiB; inject it in parts", name, maxKubeInjectInput>>20)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	if f.output != "" {
		return os.WriteFile(f.output, out.Bytes(), 0o644)
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

// limitedReader is io.LimitReader that remembers the input went on past
// the limit (rather than ending there, which would look like the end).
type limitedReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		l.over = true
		return 0, errors.New("input too large")
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

func kubeInjectSettings(f kubeInjectFlags) (*inject.Settings, error) {
	cfg := inject.DefaultConfig()
	var values inject.Values
	var mesh *meshv1alpha1.MeshConfig
	if f.injectConfigFile != "" {
		b, err := inject.ReadSettingsFile(f.injectConfigFile)
		if err != nil {
			return nil, err
		}
		if cfg, err = inject.ParseConfig(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.injectConfigFile, err)
		}
	}
	if f.valuesFile != "" {
		b, err := inject.ReadSettingsFile(f.valuesFile)
		if err != nil {
			return nil, err
		}
		if values, err = inject.ParseValues(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.valuesFile, err)
		}
	}
	if f.meshConfigFile != "" {
		// As straitd reads --mesh: a field Strait does not implement is
		// refused here too, not injected into every pod's PROXY_CONFIG.
		m, err := meshconfig.Load(f.meshConfigFile)
		if err != nil {
			return nil, err
		}
		mesh = m.Mesh
	}
	return inject.NewSettings(cfg, values, mesh)
}
