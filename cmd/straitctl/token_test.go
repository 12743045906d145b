package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/ca/token"
)

// TestTokenCreateForWorkloadEntry issues tokens as a user would, for a WorkloadEntry file
// or a namespace and service account, and checks what straitd's key
// verifies in them; refusals name the flag or field at fault.
func TestTokenCreateForWorkloadEntry(t *testing.T) {
	caDir := t.TempDir()
	key, err := token.LoadOrCreateKey(filepath.Join(caDir, token.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, yaml string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	we := func(name, ns, sa string) string {
		s := "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n  address: 10.0.0.1\n"
		if sa != "" {
			s += "  serviceAccount: " + sa + "\n"
		}
		return s
	}
	one := write("vm1.yaml", we("vm1", "shop", "orders"))
	two := write("vms.yaml", we("vm1", "shop", "orders")+"---\n"+we("vm2", "bank", "teller")+
		"---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: se, namespace: shop}\nspec: {hosts: [a.example], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC}\n")
	noSA := write("nosa.yaml", we("vm3", "shop", ""))
	noWE := write("se.yaml", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: se, namespace: shop}\nspec: {hosts: [a.example], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC}\n")

	run := func(args ...string) (string, error) {
		cmd := newTokenCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"create", "--ca-dir", caDir}, args...))
		err := cmd.Execute()
		return strings.TrimSpace(out.String()), err
	}
	for _, tc := range []struct {
		name   string
		args   []string
		ns, sa string
	}{
		{"workload entry", []string{"--workload-entry", one}, "shop", "orders"},
		{"workload entry by name", []string{"--workload-entry", two, "--name", "vm2"}, "bank", "teller"},
		{"namespace and service account", []string{"--namespace", "shop", "--service-account", "orders.v1"}, "shop", "orders.v1"},
	} {
		tok, err := run(tc.args...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		c, err := key.Verify(tok, time.Now())
		if err != nil || c.Namespace != tc.ns || c.ServiceAccount != tc.sa {
			t.Errorf("%s: claims %+v (%v), want ns %s sa %s", tc.name, c, err, tc.ns, tc.sa)
		}
	}

	out := filepath.Join(dir, "w", "var/run/secrets/tokens/istio-token")
	if _, err := run("--workload-entry", one, "-o", out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := key.Verify(strings.TrimSpace(string(data)), time.Now()); err != nil || c.ServiceAccount != "orders" {
		t.Errorf("token file: %+v %v", c, err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"several entries", []string{"--workload-entry", two}, "holds 2 WorkloadEntries (shop/vm1, bank/vm2); pick one with --name"},
		{"unknown name", []string{"--workload-entry", two, "--name", "vm9"}, `no WorkloadEntry named "vm9" (it holds shop/vm1, bank/vm2)`},
		{"no service account", []string{"--workload-entry", noSA}, "WorkloadEntry shop/vm3 has no spec.serviceAccount"},
		{"no workload entry", []string{"--workload-entry", noWE}, "holds no WorkloadEntry"},
		{"both ways", []string{"--workload-entry", one, "--namespace", "shop"}, "drop --namespace/--service-account"},
		{"name alone", []string{"--name", "vm1", "--namespace", "shop", "--service-account", "a"}, "give --workload-entry FILE too"},
		{"neither", []string{"--namespace", "shop"}, "give --workload-entry FILE, or both --namespace and --service-account"},
		{"bad namespace", []string{"--namespace", "Shop_1", "--service-account", "a"}, `namespace "Shop_1": a lowercase RFC 1123 label`},
		{"bad service account", []string{"--namespace", "shop", "--service-account", "a/b"}, `service account "a/b": a lowercase RFC 1123 subdomain`},
		{"bad ttl", []string{"--namespace", "shop", "--service-account", "a", "--ttl", "-1h"}, "--ttl -1h0m0s: want a positive duration"},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
