package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// newValidateCmd is istioctl validate's counterpart: it loads Istio YAML
// as straitd does, without a control plane, and prints every problem as
// straitd would log it.
func newValidateCmd() *cobra.Command {
	var files []string
	var mesh string
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR|- [-f ...] [--mesh FILE]",
		Short: "Check Istio YAML as straitd loads it: every invalid or refused document, by file, document and field",
		Long: `Reads Istio YAML (files, the *.yaml and *.yml files of directories, or - for
standard input) as straitd --config-dir does and prints one line per problem:

  FILE: document N: FIELD: problem

A document with a field Strait does not implement yet is refused with
"FIELD: not supported by Strait yet"; one that Istio's validation would
refuse is refused with what is wrong. Documents of other kinds are listed as
skipped. With --mesh, a mesh config (Istio's MeshConfig YAML or the istio
ConfigMap) is checked too. Exits 1 when any document is invalid or refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 && mesh == "" {
				return errors.New("nothing to validate: give -f FILE, DIR or -, or --mesh FILE")
			}
			return runValidate(cmd.InOrStdin(), cmd.OutOrStdout(), files, mesh)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory (its *.yaml and *.yml files) or - (standard input) of Istio YAML; repeatable")
	cmd.Flags().StringVar(&mesh, "mesh", "", "mesh config file to check as straitd --mesh reads it")
	return cmd
}

// runValidate checks the files and the mesh config, prints every problem
// and warning to out, and returns an error when there was a problem.
func runValidate(stdin io.Reader, out io.Writer, args []string, mesh string) error {
	paths, err := expandPaths(args)
	if err != nil {
		return err
	}
	problems, valid := 0, 0
	seen := map[proxypush.ConfigKey]string{}
	for _, p := range paths {
		var data []byte
		if p == "-" {
			data, err = istioconfig.ReadLimited(p, stdin)
		} else {
			data, err = istioconfig.ReadFile(p)
		}
		if err != nil {
			// An unreadable or oversized file is one problem; the other
			// files are still checked.
			fmt.Fprintln(out, err)
			problems++
			continue
		}
		res := istioconfig.ParseFile(p, data)
		for _, w := range res.Warnings {
			fmt.Fprintln(out, w)
		}
		for _, fe := range istioconfig.FieldErrors(res.Err) {
			fmt.Fprintln(out, fe.Error())
			problems++
		}
		for _, c := range res.Configs {
			// straitd serves one object per kind, namespace and name; a
			// second one in another file is refused there too.
			if prev, dup := seen[c.Key()]; dup {
				fmt.Fprintf(out, "%s: metadata.name: duplicate %s %s/%s (also in %s)\n", c.Source, c.Kind, c.Namespace, c.Name, prev)
				problems++
				continue
			}
			seen[c.Key()] = c.Source.String()
			valid++
		}
	}
	if mesh != "" {
		if _, err := meshconfig.Load(mesh); err != nil {
			fmt.Fprintln(out, err)
			problems++
		}
	}
	if problems > 0 {
		return fmt.Errorf("%d problem(s); %d document(s) valid", problems, valid)
	}
	fmt.Fprintf(out, "%d document(s) valid\n", valid)
	return nil
}

// expandPaths replaces each directory by its *.yaml and *.yml files,
// sorted, as straitd reads a config directory (hidden files left out).
func expandPaths(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if a == "-" {
			out = append(out, a)
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			if ext := filepath.Ext(n); strings.HasPrefix(n, ".") || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			// Regular files only (through symlinks), as straitd reads
			// the directory: a FIFO would block the read forever.
			if fi, err := os.Stat(filepath.Join(a, n)); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			names = append(names, filepath.Join(a, n))
		}
		sort.Strings(names)
		out = append(out, names...)
	}
	return out, nil
}
