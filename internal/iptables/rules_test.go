package iptables

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/golden"
	"github.com/straitmesh/strait/internal/iptables/iptablestest"
	"github.com/straitmesh/strait/internal/testreq"
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
		// The seed files are istio-iptables' own output, never regenerated.
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the generated rules (run go test -update and review the diff):\n%s", path, golden.Diff(want, []byte(got)))
	}
}

func TestBuildRulesGolden(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		// Line for line the nat block that Istio's istio-iptables writes for these flags.
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

// TestBuildPlanGolden covers what the IPv4 nat table alone does not show:
// TPROXY (mangle, policy routing), DNS capture (nat UDP, raw), dual-stack
// (ip6tables) and the interface flags. Each file is the --dry-run output.
func TestBuildPlanGolden(t *testing.T) {
	tproxy := func(c *Config) { c.InboundInterceptionMode = ModeTProxy }
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"tproxy", tproxy},
		{"tproxy_inbound_ports", func(c *Config) {
			tproxy(c)
			c.InboundPortsInclude = "80,8080"
			c.InboundTProxyMark = "1986"
			c.InboundTProxyRouteTable = "912"
		}},
		{"tproxy_inbound_none", func(c *Config) { tproxy(c); c.InboundPortsInclude = "" }},
		{"tproxy_dual_stack", func(c *Config) {
			tproxy(c)
			c.DualStack = true
			c.OutboundIPRangesExclude = "10.1.0.0/16,fd00:1::/64"
		}},
		{"dns", func(c *Config) {
			c.RedirectDNS = true
			c.DNSServers = []string{"10.96.0.10", "fd00::a"}
		}},
		{"dns_capture_all", func(c *Config) {
			c.RedirectDNS = true
			c.CaptureAllDNS = true
			c.DNSServers = []string{"10.96.0.10"}
		}},
		{"dns_dual_stack", func(c *Config) {
			c.RedirectDNS = true
			c.DualStack = true
			c.DNSServers = []string{"10.96.0.10", "fd00::a"}
		}},
		{"dual_stack", func(c *Config) {
			c.DualStack = true
			c.OutboundIPRangesInclude = "240.240.0.0/16,fd00:240::/64"
		}},
		{"dual_stack_all", func(c *Config) { c.DualStack = true }},
		{"drop_invalid", func(c *Config) { c.DropInvalid = true }},
		{"exclude_interfaces", func(c *Config) { c.ExcludeInterfaces = "eth1,veth+" }},
		{"exclude_interfaces_tproxy", func(c *Config) { tproxy(c); c.ExcludeInterfaces = "eth1" }},
		{"kube_virt", func(c *Config) { c.KubeVirtInterfaces = "vnet0,vnet1" }},
		{"kube_virt_cidrs", func(c *Config) {
			c.KubeVirtInterfaces = "vnet0"
			c.OutboundIPRangesInclude = "10.96.0.0/12,240.240.0.0/16"
		}},
		{"outbound_ports_exclude_only", func(c *Config) { c.OutboundPortsExclude = "3306,5432" }},
		{"outbound_ports_include_only", func(c *Config) {
			c.OutboundIPRangesInclude = ""
			c.OutboundPortsInclude = "80"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := seedConfig()
			tc.mod(&cfg)
			plan, err := Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "plan_"+tc.name, plan.String())
			if rs, _ := BuildRules(cfg); rs.String() != plan.IPv4.String() {
				t.Errorf("BuildRules differs from Build().IPv4")
			}
		})
	}
}

// TestRestoreInputsAreValid checks every generated rule with
// iptables-restore --test (parses, loads the matches and targets, changes
// nothing), when iptables is installed.
func TestRestoreInputsAreValid(t *testing.T) {
	testreq.Root(t, "iptables-restore --test")
	testreq.Binary(t, "iptables-restore", "iptables")
	cfg := seedConfig()
	cfg.InboundInterceptionMode = ModeTProxy
	cfg.DualStack = true
	cfg.RedirectDNS = true
	cfg.DropInvalid = true
	cfg.ExcludeInterfaces = "eth9"
	cfg.KubeVirtInterfaces = "vnet0"
	cfg.DNSServers = []string{"10.96.0.10", "fd00::a"}
	plan, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for bin, rs := range map[string]Rules{"iptables-restore": plan.IPv4, "ip6tables-restore": plan.IPv6} {
		cmd := exec.Command(bin, "--test", "--noflush")
		cmd.Stdin = strings.NewReader(restoreInput(rs, nil))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s --test: %v\n%s", bin, err, out)
		}
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
		{"ipv6 is for ip6tables", func(c *Config) { c.OutboundIPRangesInclude = "fd00::/8" }, ""},
		{"mapped ipv4", func(c *Config) { c.OutboundIPRangesExclude = "::ffff:10.0.0.0/104" },
			`-x/--istio-service-exclude-cidr: "::ffff:10.0.0.0/104" : "::ffff:10.0.0.0/104" is an IPv4-mapped IPv6 CIDR; write the IPv4 form`},
		{"bad mark", func(c *Config) { c.InboundTProxyMark = "0x539" },
			`-t/--inbound-tproxy-mark: "0x539" : is not a number`},
		{"zero mark", func(c *Config) { c.InboundTProxyMark = "0" },
			`-t/--inbound-tproxy-mark: "0" : a packet mark must not be 0`},
		{"mark collides", func(c *Config) { c.InboundInterceptionMode = ModeTProxy; c.InboundTProxyMark = "1338" },
			`-t/--inbound-tproxy-mark: "1338" : collides with the proxy's outbound mark 1338`},
		{"bad table", func(c *Config) { c.InboundTProxyRouteTable = "main" },
			`-r/--inbound-tproxy-route-table: "main" : is not a number`},
		{"reserved table", func(c *Config) { c.InboundTProxyRouteTable = "255" },
			`-r/--inbound-tproxy-route-table: "255" : is a reserved routing table (0, 253 default, 254 main, 255 local); use e.g. 133`},
		{"bad interface", func(c *Config) { c.KubeVirtInterfaces = "vnet0,averyveryverylongname" },
			`-k/--kube-virt-interfaces: "vnet0,averyveryverylongname" : "averyveryverylongname" is not a network interface name (at most 15 characters, e.g. eth1)`},
		{"bad exclude interface", func(c *Config) { c.ExcludeInterfaces = "eth 0" },
			`-c/--istio-exclude-interfaces: "eth 0" : "eth 0" is not a network interface name (at most 15 characters, e.g. eth1)`},
		{"bad tunnel port", func(c *Config) { c.InboundTunnelPort = "15008x" },
			`-e/--inbound-tunnel-port: "15008x" : is not a port number (1-65535)`},
		{"bad dns server", func(c *Config) { c.RedirectDNS = true; c.DNSServers = []string{"dns.local"} },
			`nameserver (/etc/resolv.conf): "dns.local" : is not an IP address`},
		{"bad mode", func(c *Config) { c.InboundInterceptionMode = "NAT" },
			`-m/--istio-inbound-interception-mode: "NAT" : is not an interception mode (REDIRECT or TPROXY)`},
		{"bad uid", func(c *Config) { c.ProxyUID = "istio" },
			`-u/--proxy-uid: "istio" : "istio" is not a numeric ID`},
		{"bad gid", func(c *Config) { c.ProxyGID = "1337,-1" },
			`-g/--proxy-gid: "1337,-1" : "-1" is not a numeric ID`},
		{"tproxy accepted by the parser", func(c *Config) { c.InboundInterceptionMode = "TPROXY" }, ""},
		// Boundaries: each value next to one that is refused.
		{"port 65535", func(c *Config) { c.ProxyPort = "65535" }, ""},
		{"port 65536", func(c *Config) { c.ProxyPort = "65536" },
			`-p/--envoy-port: "65536" : is not a port number (1-65535)`},
		{"port 1", func(c *Config) { c.InboundCapturePort = " 1 " }, ""},
		{"port 0", func(c *Config) { c.InboundCapturePort = "0" },
			`-z/--inbound-capture-port: "0" : is not a port number (1-65535)`},
		{"port with a leading zero", func(c *Config) { c.InboundPortsInclude = "080" },
			`-b/--istio-inbound-ports: "080" : "080" is not a port number`},
		{"port list with blanks", func(c *Config) { c.OutboundPortsExclude = " 80, ,443 ," }, ""},
		{"no uid", func(c *Config) { c.ProxyUID = " , " },
			`-u/--proxy-uid: " , " : a proxy UID is required (e.g. 1337)`},
		{"uid with a leading zero", func(c *Config) { c.ProxyUID = "01337" },
			`-u/--proxy-uid: "01337" : "01337" is not a numeric ID`},
		{"uid 2^32-1", func(c *Config) { c.ProxyUID = "4294967295" }, ""},
		{"uid 2^32", func(c *Config) { c.ProxyUID = "4294967296" },
			`-u/--proxy-uid: "4294967296" : "4294967296" is not a numeric ID`},
		{"gid defaults to the uid", func(c *Config) { c.ProxyUID = "x"; c.ProxyGID = "1337" },
			`-u/--proxy-uid: "x" : "x" is not a numeric ID`},
		{"blank gid takes the uid", func(c *Config) { c.ProxyUID = "1337"; c.ProxyGID = "  " }, ""},
		{"mode with blanks", func(c *Config) { c.InboundInterceptionMode = " TPROXY " }, ""},
		{"mark 1", func(c *Config) { c.InboundTProxyMark = "1" }, ""},
		{"mark 2^32-1", func(c *Config) { c.InboundTProxyMark = "4294967295" }, ""},
		{"mark 2^32", func(c *Config) { c.InboundTProxyMark = "4294967296" },
			`-t/--inbound-tproxy-mark: "4294967296" : is not a number`},
		{"outbound mark in REDIRECT mode", func(c *Config) { c.InboundTProxyMark = "1338" }, ""},
		{"table 1", func(c *Config) { c.InboundTProxyRouteTable = "1" }, ""},
		{"table 0", func(c *Config) { c.InboundTProxyRouteTable = "0" },
			`-r/--inbound-tproxy-route-table: "0" : is a reserved routing table (0, 253 default, 254 main, 255 local); use e.g. 133`},
		{"table 252", func(c *Config) { c.InboundTProxyRouteTable = "252" }, ""},
		{"table 253", func(c *Config) { c.InboundTProxyRouteTable = "253" },
			`-r/--inbound-tproxy-route-table: "253" : is a reserved routing table (0, 253 default, 254 main, 255 local); use e.g. 133`},
		{"table 256", func(c *Config) { c.InboundTProxyRouteTable = "256" }, ""},
		{"table 2^32", func(c *Config) { c.InboundTProxyRouteTable = "4294967296" },
			`-r/--inbound-tproxy-route-table: "4294967296" : is not a number`},
		{"interface of 15 bytes", func(c *Config) { c.ExcludeInterfaces = "abcdefghijklmno,veth+" }, ""},
		{"interface of 16 bytes", func(c *Config) { c.ExcludeInterfaces = "abcdefghijklmnop" },
			`-c/--istio-exclude-interfaces: "abcdefghijklmnop" : "abcdefghijklmnop" is not a network interface name (at most 15 characters, e.g. eth1)`},
		{"interface with a slash", func(c *Config) { c.KubeVirtInterfaces = "a/b" },
			`-k/--kube-virt-interfaces: "a/b" : "a/b" is not a network interface name (at most 15 characters, e.g. eth1)`},
		{"cidr with a zone", func(c *Config) { c.OutboundIPRangesInclude = "fe80::%eth0/64" },
			`-i/--istio-service-cidr: "fe80::%eth0/64" : "fe80::%eth0/64" is not a CIDR (e.g. 10.96.0.0/12)`},
		{"wildcard exclude with blanks", func(c *Config) { c.OutboundIPRangesExclude = " * " },
			`-x/--istio-service-exclude-cidr: " * " : "*" is not allowed here; list the CIDRs to exclude`},
		{"bad exclude cidr", func(c *Config) { c.OutboundIPRangesExclude = "10.0.0.0/33" },
			`-x/--istio-service-exclude-cidr: "10.0.0.0/33" : "10.0.0.0/33" is not a CIDR (e.g. 10.96.0.0/12)`},
		{"dns server with a zone", func(c *Config) { c.RedirectDNS = true; c.DNSServers = []string{"fe80::1%eth0"} },
			`nameserver (/etc/resolv.conf): "fe80::1%eth0" : is not an IP address`},
		{"dns server with blanks", func(c *Config) { c.RedirectDNS = true; c.DNSServers = []string{" 10.96.0.10 "} }, ""},
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

func TestTProxyIsImplemented(t *testing.T) {
	cfg := seedConfig()
	cfg.InboundInterceptionMode = ModeTProxy
	if _, err := BuildRules(cfg); err != nil {
		t.Fatalf("BuildRules(TPROXY) = %v", err)
	}
}

// savedAfterApply is what iptables-save -t nat prints after the rules for Istio's injected arguments
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
	fake := &iptablestest.RecordingRunner{Tables: map[string]string{"nat": savedAfterApply}}
	input, err := Apply(context.Background(), fake, rs)
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.Restores) != 1 || fake.Restores[0] != input {
		t.Fatalf("Restores = %q, want exactly the returned input", fake.Restores)
	}
	checkGolden(t, "apply_existing", input)

	// On a clean table there is nothing to delete.
	fresh := &iptablestest.RecordingRunner{}
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
	fake := &iptablestest.RecordingRunner{Err: errors.New("boom")}
	if _, err := Apply(context.Background(), fake, rs); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Apply() = %v, want the runner's error", err)
	}
}

// TestInstallConvergesRouting: stale policy routing of ours (another mark,
// table or a duplicate) is removed, the wanted entries are added once, and
// entries without protocol 76 are never touched.
func TestInstallConvergesRouting(t *testing.T) {
	cfg := seedConfig()
	cfg.InboundInterceptionMode = ModeTProxy
	plan, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fake := &iptablestest.RecordingRunner{IPOutput: map[string]string{
		"-4 rule show": "0:\tfrom all lookup local\n" +
			"32762:\tfrom all fwmark 0x7 lookup 70\n" +
			"32763:\tfrom all fwmark 0x539 lookup 133 proto 76\n" +
			"32764:\tfrom all fwmark 0x539 lookup 133 proto 76\n" +
			"32765:\tfrom all fwmark 0x7c2 lookup 912 proto 76\n",
		"-4 route show table all proto 76": "local default dev lo table 912 scope host \n",
		"-6 addr show dev lo":              "1: lo: <LOOPBACK,UP>\n    inet6 ::6/128 scope global \n",
	}}
	rep, err := Install(context.Background(), System{IPv4: fake, Router: fake}, plan)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rep.IPCommands {
		got = append(got, strings.Join(c, " "))
	}
	want := []string{
		"-4 rule del pref 32764 protocol 76",
		"-4 rule del pref 32765 protocol 76",
		"-4 route flush table 912 proto 76",
		"-4 route replace local default dev lo table 133 proto 76",
		"-6 addr del ::6/128 dev lo", // not dual-stack
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ip commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Cleanup of a clean namespace runs nothing that changes anything.
	clean := &iptablestest.RecordingRunner{}
	rep, err = Cleanup(context.Background(), System{IPv4: clean, IPv6: clean, Router: clean})
	if err != nil || len(rep.IPCommands) != 0 || len(clean.Restores) != 0 {
		t.Errorf("cleanup of nothing: %v %q %q", err, rep.IPCommands, clean.Restores)
	}
}
