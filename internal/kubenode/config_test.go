package kubenode

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

// The pod network must not reach off the machine: no masquerade, no
// default route, the plugin never re-addresses the bridge or turns on IP
// forwarding, and pods route only the service range besides their /24.
func TestCNIConfigStaysOnTheBridge(t *testing.T) {
	data, err := cniConfig("stbabc", "10.77.5.0/24", "10.77.5.1", "10.96.0.0/16", "/x/ipam")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type        string
			Bridge      string
			IsGateway   *bool
			IsDefaultGW *bool `json:"isDefaultGateway"`
			IPMasq      *bool
			IPAM        struct {
				Type    string
				DataDir string
				Ranges  [][]map[string]string
				Routes  []map[string]string
			}
		}
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 1 {
		t.Fatalf("plugins: %s", data)
	}
	p := conf.Plugins[0]
	if p.Type != "bridge" || p.Bridge != "stbabc" {
		t.Errorf("plugin %s on %s, want bridge on stbabc", p.Type, p.Bridge)
	}
	if p.IsGateway == nil || *p.IsGateway || p.IPMasq == nil || *p.IPMasq || (p.IsDefaultGW != nil && *p.IsDefaultGW) {
		t.Errorf("isGateway %v, ipMasq %v, isDefaultGateway %v: want false, false, unset", p.IsGateway, p.IPMasq, p.IsDefaultGW)
	}
	if p.IPAM.Type != "host-local" || p.IPAM.DataDir != "/x/ipam" {
		t.Errorf("ipam %s in %s, want host-local in /x/ipam", p.IPAM.Type, p.IPAM.DataDir)
	}
	r := p.IPAM.Ranges[0][0]
	if r["subnet"] != "10.77.5.0/24" || r["gateway"] != "10.77.5.1" || r["rangeStart"] != "10.77.5.100" || r["rangeEnd"] != "10.77.5.250" {
		t.Errorf("range %v", r)
	}
	if len(p.IPAM.Routes) != 1 || p.IPAM.Routes[0]["dst"] != "10.96.0.0/16" || p.IPAM.Routes[0]["gw"] != "10.77.5.1" {
		t.Errorf("routes %v, want only 10.96.0.0/16 via the node", p.IPAM.Routes)
	}
}

func TestContainerdConfigKeepsToItsDirectory(t *testing.T) {
	conf := containerdConfig("/n/containerd", PauseImage, "/n/cni/net.d")
	for _, want := range []string{
		`root = "/n/containerd/root"`,
		`state = "/n/containerd/state"`,
		`address = "/n/containerd/containerd.sock"`,
		`address = "/n/containerd/containerd.sock.ttrpc"`,
		`sandbox_image = "` + PauseImage + `"`,
		`Root = "/n/containerd/runc"`,
		`conf_dir = "/n/cni/net.d"`,
		`SystemdCgroup = false`,
		`restrict_oom_score_adj = true`,
		`"io.containerd.internal.v1.opt"`,
		`stream_server_address = "127.0.0.1"`,
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, conf)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:           "/a/b",
		`/a\040b`:        "/a b",
		`/tab\011x\134y`: "/tab\tx\\y",
		`/odd\04`:        `/odd\04`,
		`/not\x41octal`:  `/not\x41octal`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKubeletConfig(t *testing.T) {
	n := &Node{Dir: "/n"}
	n.IP = mustAddr(t, "10.77.5.1")
	data, err := n.kubeletConfig(1234, 5678)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"kind":                        "KubeletConfiguration",
		"address":                     "10.77.5.1",
		"port":                        float64(1234),
		"healthzPort":                 float64(5678),
		"healthzBindAddress":          "127.0.0.1",
		"readOnlyPort":                float64(0),
		"containerRuntimeEndpoint":    "unix:///n/containerd/containerd.sock",
		"cgroupDriver":                "cgroupfs",
		"cgroupsPerQOS":               false,
		"failSwapOn":                  false,
		"failCgroupV1":                false,
		"podLogsDir":                  "/n/pod-logs",
		"volumePluginDir":             "/n/volume-plugins",
		"imageGCHighThresholdPercent": float64(100),
		"clusterDomain":               "cluster.local",
		"resolvConf":                  "",
	} {
		if got := c[key]; got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	if got, _ := c["clusterDNS"].([]any); len(got) != 1 || got[0] != "10.77.5.1" {
		t.Errorf("clusterDNS = %v, want [10.77.5.1] (the node's DNS server on its bridge address)", c["clusterDNS"])
	}
	// A disk signal that fires deletes the imported images, which no
	// registry can give back.
	evict, _ := c["evictionHard"].(map[string]any)
	for _, signal := range []string{"nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree"} {
		if got := evict[signal]; got != "0%" {
			t.Errorf("evictionHard[%s] = %v, want 0%% (no disk-pressure eviction on a shared disk)", signal, got)
		}
	}
	if got, _ := c["enforceNodeAllocatable"].([]any); got == nil || len(got) != 0 {
		t.Errorf("enforceNodeAllocatable = %v, want [] (no QoS cgroups to enforce in)", c["enforceNodeAllocatable"])
	}
}

func mustAddr(t *testing.T, s string) (a netip.Addr) {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
