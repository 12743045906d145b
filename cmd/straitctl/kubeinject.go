package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/straitmesh/strait/internal/inject"
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

func runKubeInject(stdin io.Reader, stdout io.Writer, f kubeInjectFlags) error {
	settings, err := kubeInjectSettings(f)
	if err != nil {
		return err
	}
	in := stdin
	if f.filename != "-" {
		file, err := os.Open(f.filename)
		if err != nil {
			return err
		}
		defer file.Close()
		in = file
	}
	out := stdout
	var outFile *os.File
	if f.output != "" {
		if outFile, err = os.Create(f.output); err != nil {
			return err
		}
		out = outFile
	}
	inj := inject.New(settings, inject.Options{Revision: f.revision})
	err = inj.IntoResourceFile(in, out)
	if outFile != nil {
		if cerr := outFile.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

func kubeInjectSettings(f kubeInjectFlags) (*inject.Settings, error) {
	cfg := inject.DefaultConfig()
	var values inject.Values
	var mesh *meshv1alpha1.MeshConfig
	if f.injectConfigFile != "" {
		b, err := os.ReadFile(f.injectConfigFile)
		if err != nil {
			return nil, err
		}
		if cfg, err = inject.ParseConfig(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.injectConfigFile, err)
		}
	}
	if f.valuesFile != "" {
		b, err := os.ReadFile(f.valuesFile)
		if err != nil {
			return nil, err
		}
		if values, err = inject.ParseValues(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.valuesFile, err)
		}
	}
	if f.meshConfigFile != "" {
		b, err := os.ReadFile(f.meshConfigFile)
		if err != nil {
			return nil, err
		}
		if mesh, err = inject.ParseMeshConfig(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.meshConfigFile, err)
		}
	}
	return inject.NewSettings(cfg, values, mesh)
}
