package localmesh

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/netns"
)

// AppAnnotation on a WorkloadEntry is the command line (split at spaces)
// that `straitctl local up` runs as the pod's application instead of
// strait-echo. {{POD_DIR}} in it is the pod's directory.
const AppAnnotation = "local.strait.io/app"

// AppAsRootAnnotation "true" on a WorkloadEntry runs the pod's app as
// root (Workload.AppAsRoot) instead of the pod's own app user; "false" is
// the default. An app that runs as root is trusted with the host: it can
// undo the pod's mount namespace and read every pod's secrets.
const AppAsRootAnnotation = "local.strait.io/app-as-root"

// OutsideMeshAnnotation "true" on a WorkloadEntry makes its pod a host
// outside the mesh: local up gives it its network namespace on the bridge
// and its app, but no sidecar and no capture, as a server beyond the
// mesh's edge would be (the external host of a MESH_EXTERNAL ServiceEntry
// that names the pod's address in its endpoints, e.g. behind an egress
// gateway). No ServiceEntry may select it.
const OutsideMeshAnnotation = "local.strait.io/outside-mesh"

// maxPodName is the longest pod name a network namespace takes here.
const maxPodName = 32

// UserPlan is what `straitctl local up` makes of a user's config
// directory: one pod per WorkloadEntry, at the WorkloadEntry's address.
type UserPlan struct {
	// Subnet is the /24 every WorkloadEntry address is in: the bridge's.
	Subnet netip.Prefix
	// Workloads are the pods, sorted by namespace and name.
	Workloads []Workload
	// Labels are each pod's WorkloadEntry labels, by pod name.
	Labels map[string]map[string]string
	// Ports are the ports each pod's app listens on, by pod name.
	Ports map[string][]int
	// Gateways are the servers each gateway pod runs, by pod name
	// (gateway.go).
	Gateways map[string][]GatewayServer
}

// PlanUserConfig reads the Istio YAML of dir (the directory straitd will
// serve) and plans one pod per WorkloadEntry. Every document must be valid
// (the error names each bad file, document and field); every WorkloadEntry
// needs an IPv4 address, all in one /24 whose .1 is left to the host
// (straitd listens there); ServiceEntry VIPs must be in the pods' service
// range. A pod's app is strait-echo on the target ports of the
// ServiceEntries that select it, reporting the pod's "version" label,
// unless the WorkloadEntry's AppAnnotation names another command.
func PlanUserConfig(dir string) (*UserPlan, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read config dir: %w", err)
	}
	var configs []*istioconfig.Config
	var errs []error
	files := 0
	// One object per kind, namespace and name across the files, as
	// straitd serves them: a second definition is refused here too.
	store := istioconfig.NewStore()
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		// Hidden files are left out, as straitd's file registry does.
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		files++
		res := istioconfig.LoadFile(filepath.Join(dir, e.Name()))
		if res.Err != nil {
			errs = append(errs, res.Err)
		}
		for _, c := range res.Configs {
			if err := store.Add(c); err != nil {
				errs = append(errs, err)
				continue
			}
			configs = append(configs, c)
		}
	}
	if files == 0 {
		return nil, fmt.Errorf("config dir %s has no *.yaml or *.yml files: put the mesh's Istio YAML there (see examples/demo)", dir)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid config (fix or remove these documents; `straitctl validate DIR` checks them):\n%w", errors.Join(errs...))
	}
	var wes, ses, gws []*istioconfig.Config
	for _, c := range configs {
		switch c.Kind {
		case istioconfig.KindWorkloadEntry:
			wes = append(wes, c)
		case istioconfig.KindServiceEntry:
			ses = append(ses, c)
		case istioconfig.KindGateway:
			gws = append(gws, c)
		}
	}
	if len(wes) == 0 {
		return nil, fmt.Errorf("config dir %s has no WorkloadEntry: local up makes one pod per WorkloadEntry; add one per workload (see examples/demo/mesh.yaml)", dir)
	}
	slices.SortFunc(wes, func(a, b *istioconfig.Config) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	plan := &UserPlan{Labels: map[string]map[string]string{}, Ports: map[string][]int{}, Gateways: map[string][]GatewayServer{}}
	var first *istioconfig.Config
	byName := map[string]*istioconfig.Config{}
	for _, c := range wes {
		we := c.Spec.(*networking.WorkloadEntry)
		at := fmt.Sprintf("%s: WorkloadEntry %s/%s", c.Source, c.Namespace, c.Name)
		if len(c.Name) > maxPodName {
			return nil, fmt.Errorf("%s: metadata.name is %d characters; a local pod name has at most %d: shorten it", at, len(c.Name), maxPodName)
		}
		if other, ok := byName[c.Name]; ok {
			return nil, fmt.Errorf("%s: metadata.name %q is also WorkloadEntry %s/%s (%s): local pods are named after their WorkloadEntry, so names must differ across namespaces; rename one",
				at, c.Name, other.Namespace, other.Name, other.Source)
		}
		byName[c.Name] = c
		ip, err := netip.ParseAddr(we.GetAddress())
		if err != nil || !ip.Is4() {
			return nil, fmt.Errorf("%s: spec.address %q: local up gives the pod this address, so it must be an IPv4 address (e.g. 10.99.0.11)", at, we.GetAddress())
		}
		if first == nil {
			first = c
			plan.Subnet = netip.PrefixFrom(ip, 24).Masked()
			if !plan.Subnet.Addr().IsPrivate() {
				return nil, fmt.Errorf("%s: spec.address %s: the pods' bridge takes the address's /24 (%s), which is not a private range: use addresses in 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16", at, ip, plan.Subnet)
			}
		} else if !plan.Subnet.Contains(ip) {
			return nil, fmt.Errorf("%s: spec.address %s is outside %s, the /24 of WorkloadEntry %s/%s's address: local up puts every pod on one bridge; give every WorkloadEntry an address in one /24",
				at, ip, plan.Subnet, first.Namespace, first.Name)
		}
		switch ip.As4()[3] {
		case 0, 255:
			return nil, fmt.Errorf("%s: spec.address %s is the network or broadcast address of %s: use .2 to .254", at, ip, plan.Subnet)
		case 1:
			return nil, fmt.Errorf("%s: spec.address %s is the host's address on the bridge (straitd listens there): use .2 to .254", at, ip)
		}
		for _, w := range plan.Workloads {
			if w.IP == ip {
				return nil, fmt.Errorf("%s: spec.address %s is also pod %s's: give each WorkloadEntry its own address", at, ip, w.Name)
			}
		}
		ports, err := targetPorts(c, ses)
		if err != nil {
			return nil, err
		}
		w := Workload{Name: c.Name, Namespace: c.Namespace, IP: ip, ServiceAccount: we.GetServiceAccount()}
		if servers := gatewayServers(gws, we.GetLabels(), ip); len(servers) > 0 {
			if _, ok := c.Annotations[AppAnnotation]; ok {
				return nil, fmt.Errorf("%s: a Gateway selects this WorkloadEntry, which makes it a gateway pod with no app: remove metadata.annotations[%s]", at, AppAnnotation)
			}
			// A ServiceEntry that selects a gateway is the gateway's
			// Service (istio-egressgateway's, which sidecars send to):
			// the gateway's proxy listens on its ports, there is no app.
			ports = nil
			w.Gateway = true
			plan.Gateways[c.Name] = servers
		}
		switch v, ok := c.Annotations[OutsideMeshAnnotation]; {
		case !ok || v == "false":
		case v != "true":
			return nil, fmt.Errorf("%s: metadata.annotations[%s] is %q: want \"true\" (a host outside the mesh, no sidecar) or \"false\"", at, OutsideMeshAnnotation, v)
		case w.Gateway:
			return nil, fmt.Errorf("%s: metadata.annotations[%s]: a Gateway selects this WorkloadEntry, which makes it a gateway pod of the mesh: remove the annotation or the Gateway's selector", at, OutsideMeshAnnotation)
		case len(ports) > 0:
			return nil, fmt.Errorf("%s: metadata.annotations[%s]: a ServiceEntry selects this WorkloadEntry as a workload of the mesh; a host outside the mesh is named by its address in a MESH_EXTERNAL ServiceEntry's endpoints instead", at, OutsideMeshAnnotation)
		case c.Annotations[AppAnnotation] == "":
			return nil, fmt.Errorf("%s: metadata.annotations[%s]: a host outside the mesh runs the command of metadata.annotations[%s]: give one", at, OutsideMeshAnnotation, AppAnnotation)
		default:
			w.OutsideMesh = true
		}
		appMetrics, metricsPort, err := appMetricsFromAnnotations(c.Annotations)
		if err != nil {
			return nil, fmt.Errorf("%s: metadata.annotations: %w", at, err)
		}
		if !w.Gateway && !w.OutsideMesh {
			w.AppMetrics = appMetrics
		}
		if cmdline, ok := c.Annotations[AppAnnotation]; ok {
			w.App = strings.Fields(cmdline)
			if len(w.App) == 0 {
				return nil, fmt.Errorf("%s: metadata.annotations[%s] is empty: give a command line, or remove it to run strait-echo", at, AppAnnotation)
			}
		} else if len(ports) > 0 {
			addrs := make([]string, len(ports))
			for i, p := range ports {
				addrs[i] = ":" + strconv.Itoa(p)
			}
			w.App = []string{"strait-echo", "--addr", strings.Join(addrs, ","), "--version", we.GetLabels()["version"]}
			if w.AppMetrics != "" {
				// The echo serves its own metrics where the annotations say.
				w.App = append(w.App, "--metrics-addr", ":"+strconv.Itoa(metricsPort))
			}
		}
		if len(ports) > 0 {
			w.AppPort = ports[0]
		}
		if v, ok := c.Annotations[AppAsRootAnnotation]; ok {
			switch v {
			case "true":
				w.AppAsRoot = true
			case "false":
			default:
				return nil, fmt.Errorf("%s: metadata.annotations[%s] is %q: want \"true\" (run the app as root) or \"false\"", at, AppAsRootAnnotation, v)
			}
		}
		w.Labels = maps.Clone(we.GetLabels())
		plan.Workloads = append(plan.Workloads, w)
		plan.Labels[c.Name] = maps.Clone(we.GetLabels())
		plan.Ports[c.Name] = ports
	}
	for _, c := range ses {
		se := c.Spec.(*networking.ServiceEntry)
		for i, a := range se.GetAddresses() {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				ip, aerr := netip.ParseAddr(a)
				if aerr != nil {
					continue // the config's own validation reports it
				}
				p = netip.PrefixFrom(ip, ip.BitLen())
			}
			if !netns.ServiceCIDR.Contains(p.Addr()) || p.Bits() < netns.ServiceCIDR.Bits() {
				return nil, fmt.Errorf("%s: ServiceEntry %s/%s: spec.addresses[%d] %s: local pods route only the service range %s (and their own subnet) to their sidecar; use an address in %s",
					c.Source, c.Namespace, c.Name, i, a, netns.ServiceCIDR, netns.ServiceCIDR)
			}
		}
	}
	return plan, nil
}

// targetPorts are the ports on which the ServiceEntries that select the
// WorkloadEntry we reach it, sorted: the WorkloadEntry's own port for the
// service port's name, else the port's targetPort, else its number (as
// Istio resolves a WorkloadEntry endpoint's port).
func targetPorts(we *istioconfig.Config, ses []*istioconfig.Config) ([]int, error) {
	spec := we.Spec.(*networking.WorkloadEntry)
	seen := map[int]bool{}
	for _, c := range ses {
		se := c.Spec.(*networking.ServiceEntry)
		sel := se.GetWorkloadSelector().GetLabels()
		if c.Namespace != we.Namespace || len(sel) == 0 || !selects(sel, spec.GetLabels()) {
			continue
		}
		for _, p := range se.GetPorts() {
			port := int(p.GetNumber())
			if p.GetTargetPort() != 0 {
				port = int(p.GetTargetPort())
			}
			if wp, ok := spec.GetPorts()[p.GetName()]; ok && wp != 0 {
				port = int(wp)
			}
			if port >= 15000 && port <= 15100 {
				return nil, fmt.Errorf("%s: ServiceEntry %s/%s port %q reaches WorkloadEntry %s/%s on port %d, which the sidecar uses (15000-15100): pick another targetPort",
					c.Source, c.Namespace, c.Name, p.GetName(), we.Namespace, we.Name, port)
			}
			seen[port] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// selects reports whether every label of sel is in labels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
