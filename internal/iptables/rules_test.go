package iptables

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// seedConfig is the seed's istio-init args:
// -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020
func seedConfig() Config {
	c := DefaultConfig()
	c.ProxyPort = "15001"
	c.InboundCapturePort = "15006"
	c.ProxyUID = "1337"
	c.InboundInterceptionMode = "REDIRECT"
	c.OutboundIPRangesInclude = "*"
	c.OutboundIPRangesExclude = ""
	c.InboundPortsInclude = "*"
	c.InboundPortsExclude = "15090,15021,15020"
	return c
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update && name != "seed" && !strings.HasPrefix(name, "seed_") {
		// The seed files are copied from the seed, never regenerated.
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s mismatch\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestBuildRulesGolden(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		// Line for line the seed's nat block (002:223-290).
		{"seed", func(*Config) {}},
		{"inbound_ports", func(c *Config) { c.InboundPortsInclude = "8080,9090" }},
		{"inbound_none", func(c *Config) { c.InboundPortsInclude = "" }},
		{"outbound_cidrs", func(c *Config) { c.OutboundIPRangesInclude = "240.240.0.0/16,10.96.0.0/12" }},
		{"outbound_none", func(c *Config) { c.OutboundIPRangesInclude = "" }},
		{"exclude_cidrs", func(c *Config) { c.OutboundIPRangesExclude = "10.1.2.3/16, 192.168.0.0/24" }},
		{"outbound_loopback", func(c *Config) { c.OutboundIPRangesInclude = "127.0.0.1/32,240.240.0.0/16" }},
		{"outbound_ports", func(c *Config) {
			c.OutboundPortsInclude = "80,443"
			c.OutboundPortsExclude = "3306"
		}},
		{"uid_gid_lists", func(c *Config) {
			c.ProxyUID = "1337,0"
			c.ProxyGID = "1338"
			c.InboundTunnelPort = "15009"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := seedConfig()
			tc.mod(&cfg)
			rs, err := BuildRules(cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.name, rs.String())
		})
	}
}

func TestLogBlocksMatchSeed(t *testing.T) {
	checkGolden(t, "seed_variables", seedConfig().VariablesBlock())
	checkGolden(t, "seed_environment", EnvironmentBlock(func(string) string { return "" }))
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string // full error text, or "" for valid
	}{
		{"seed", func(*Config) {}, ""},
		{"bad inbound port", func(c *Config) { c.InboundPortsInclude = "80,x" },
			`-b/--istio-inbound-ports: "80,x" : "x" is not a port number`},
		{"port out of range", func(c *Config) { c.InboundPortsExclude = "15090,70000" },
			`-d/--istio-local-exclude-ports: "15090,70000" : "70000" is not a port number`},
		{"port zero", func(c *Config) { c.OutboundPortsInclude = "0" },
			`-q/--istio-outbound-ports: "0" : "0" is not a port number`},
		{"bad envoy port", func(c *Config) { c.ProxyPort = "abc" },
			`-p/--envoy-port: "abc" : is not a port number (1-65535)`},
		{"bad capture port", func(c *Config) { c.InboundCapturePort = "" },
			`-z/--inbound-capture-port: "" : is not a port number (1-65535)`},
		{"bad cidr", func(c *Config) { c.OutboundIPRangesInclude = "10.0.0.0/8,10.0.0.300/8" },
			`-i/--istio-service-cidr: "10.0.0.0/8,10.0.0.300/8" : "10.0.0.300/8" is not a CIDR (e.g. 10.96.0.0/12)`},
		{"bare ip", func(c *Config) { c.OutboundIPRangesExclude = "10.0.0.1" },
			`-x/--istio-service-exclude-cidr: "10.0.0.1" : "10.0.0.1" is not a CIDR (e.g. 10.96.0.0/12)`},
		{"exclude wildcard", func(c *Config) { c.OutboundIPRangesExclude = "*" },
			`-x/--istio-service-exclude-cidr: "*" : "*" is not allowed here; list the CIDRs to exclude`},
		{"ipv6", func(c *Config) { c.OutboundIPRangesInclude = "fd00::/8" },
			`-i/--istio-service-cidr: "fd00::/8" : "fd00::/8" is IPv6; only IPv4 is supported yet`},
		{"bad mode", func(c *Config) { c.InboundInterceptionMode = "NAT" },
			`-m/--istio-inbound-interception-mode: "NAT" : is not an interception mode (REDIRECT or TPROXY)`},
		{"bad uid", func(c *Config) { c.ProxyUID = "istio" },
			`-u/--proxy-uid: "istio" : "istio" is not a numeric ID`},
		{"bad gid", func(c *Config) { c.ProxyGID = "1337,-1" },
			`-g/--proxy-gid: "1337,-1" : "-1" is not a numeric ID`},
		{"tproxy accepted by the parser", func(c *Config) { c.InboundInterceptionMode = "TPROXY" }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := seedConfig()
			tc.mod(&cfg)
			err := cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FlagError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want a *FlagError", err)
			}
			if err.Error() != tc.want {
				t.Fatalf("Validate() =\n  %s\nwant\n  %s", err, tc.want)
			}
			if _, err := BuildRules(cfg); err == nil || err.Error() != tc.want {
				t.Fatalf("BuildRules() error = %v, want the Validate error", err)
			}
		})
	}
}

func TestTProxyNotImplemented(t *testing.T) {
	cfg := seedConfig()
	cfg.InboundInterceptionMode = ModeTProxy
	if _, err := BuildRules(cfg); !errors.Is(err, ErrTProxyNotImplemented) {
		t.Fatalf("BuildRules(TPROXY) = %v, want ErrTProxyNotImplemented", err)
	}
}

// savedAfterApply is what iptables-save -t nat prints after the seed rules
// were applied once (trimmed to what RestoreInput reads), plus a foreign
// rule and a stale ISTIO chain from an older configuration.
const savedAfterApply = `# Generated by iptables-save v1.8.9 (nf_tables)
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:ISTIO_INBOUND - [0:0]
:ISTIO_IN_REDIRECT - [0:0]
:ISTIO_OUTPUT - [0:0]
:ISTIO_REDIRECT - [0:0]
:ISTIO_OLD - [0:0]
:KEEP_ME - [0:0]
-A PREROUTING -p tcp -j ISTIO_INBOUND
-A PREROUTING -i eth9 -j KEEP_ME
-A OUTPUT -p tcp -j ISTIO_OUTPUT
-A OUTPUT -d 10.0.0.0/8 -j ISTIO_OLD
-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN
-A ISTIO_OUTPUT -j ISTIO_REDIRECT
COMMIT
`

func TestApplyReplacesEarlierRules(t *testing.T) {
	rs, err := BuildRules(seedConfig())
	if err != nil {
		t.Fatal(err)
	}
	fake := &RecordingRunner{Tables: map[string]string{"nat": savedAfterApply}}
	input, err := Apply(context.Background(), fake, rs)
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.Restores) != 1 || fake.Restores[0] != input {
		t.Fatalf("Restores = %q, want exactly the returned input", fake.Restores)
	}
	checkGolden(t, "apply_existing", input)

	// On a clean table there is nothing to delete.
	fresh := &RecordingRunner{}
	input, err = Apply(context.Background(), fresh, rs)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "apply_fresh", input)
}

func TestApplyReportsRestoreError(t *testing.T) {
	rs, err := BuildRules(seedConfig())
	if err != nil {
		t.Fatal(err)
	}
	fake := &RecordingRunner{Err: errors.New("boom")}
	if _, err := Apply(context.Background(), fake, rs); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Apply() = %v, want the runner's error", err)
	}
}
