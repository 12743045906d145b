package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/testreq"
)

// TestDNSUpstreams: --dns-upstream's values become host:port upstreams;
// without it the host's resolv.conf nameservers are used; "none" gives no
// forwarder; bad values and a resolv.conf without nameservers are refused
// with the flag named.
func TestDNSUpstreams(t *testing.T) {
	dir := t.TempDir()
	withServers := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(withServers, []byte("search example.org\nnameserver 127.0.0.53\nnameserver fd00::53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("search example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		flag    []string
		conf    string
		want    []string
		wantErr string
	}{
		{name: "host resolv.conf", conf: withServers, want: []string{"127.0.0.53:53", "[fd00::53]:53"}},
		{name: "flag", flag: []string{"192.0.2.1", "192.0.2.2:5353", "[2001:db8::1]:53"}, conf: empty,
			want: []string{"192.0.2.1:53", "192.0.2.2:5353", "[2001:db8::1]:53"}},
		{name: "none", flag: []string{"none"}, conf: filepath.Join(dir, "missing")},
		{name: "no nameserver", conf: empty, wantErr: "--dns-upstream"},
		{name: "missing resolv.conf", conf: filepath.Join(dir, "missing"), wantErr: "--dns-upstream"},
		{name: "name, not address", flag: []string{"dns.example.org"}, conf: withServers, wantErr: `--dns-upstream "dns.example.org"`},
		{name: "none with others", flag: []string{"none", "192.0.2.1"}, conf: withServers, wantErr: `"none" cannot be combined`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dnsUpstreams(tc.flag, tc.conf)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("dnsUpstreams(%q) = %q, %v; want an error with %q", tc.flag, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("dnsUpstreams(%q) = %q, %v; want %q", tc.flag, got, err, tc.want)
			}
		})
	}
}

// TestUpMeshConfigRefused: `local up --mesh-config` with a field Strait
// does not implement fails before anything is made, naming the flag and
// the field; a missing file names the flag too.
func TestUpMeshConfigRefused(t *testing.T) {
	testreq.Root(t, "local up checks for root before its flags")
	dir := t.TempDir()
	bad := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(bad, []byte("enableTracing: true\nenableEnvoyAccessLogService: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	for file, want := range map[string]string{
		bad:                                "enableEnvoyAccessLogService",
		filepath.Join(dir, "missing.yaml"): "missing.yaml",
	} {
		cmd := newUpCmd()
		cmd.SetArgs([]string{"--config-dir", "../../examples/demo", "--mesh-config", file, "--state-dir", state})
		cmd.SetOut(&strings.Builder{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--mesh-config") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want --mesh-config and %s named", file, err, want)
		}
		if _, serr := os.Stat(state); serr == nil {
			t.Errorf("%s: the state dir was made before the mesh config was checked", file)
		}
	}
}
