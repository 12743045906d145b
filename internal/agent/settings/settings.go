// Package settings reads the sidecar agent's configuration: the pod's
// environment (POD_NAME, POD_NAMESPACE, INSTANCE_IP, SERVICE_ACCOUNT,
// ISTIO_META_*), the command-line flags and the merged ProxyConfig. It is
// read once in main and passed down; nothing here is global.
package settings

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/locality"
	"github.com/straitmesh/strait/internal/promscrape"
	"github.com/straitmesh/strait/internal/proxypush"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// Environment variables and files the agent reads.
const (
	EnvPodName              = "POD_NAME"
	EnvPodNamespace         = "POD_NAMESPACE"
	EnvInstanceIP           = "INSTANCE_IP"
	EnvServiceAccount       = "SERVICE_ACCOUNT"
	EnvProxyConfig          = "PROXY_CONFIG"
	EnvMinimumDrainDuration = "MINIMUM_DRAIN_DURATION"
	// EnvMetaJSONLabels carries the pod's labels as a JSON object
	// (Istio's ISTIO_METAJSON_LABELS).
	EnvMetaJSONLabels = "ISTIO_METAJSON_LABELS"
	// EnvXDSSocketPath overrides the xDS proxy's Unix socket
	// (default CONFIG_PATH/XDS, Istio's ./etc/istio/proxy/XDS).
	EnvXDSSocketPath = "XDS_SOCKET_PATH"
	// EnvProxyMode is how the agent runs the proxy (ProxyMode): inprocess
	// or exec; unset, in-process when binaryPath names strait-proxy.
	EnvProxyMode = "STRAIT_PROXY_MODE"
	// MetaPrefix marks node metadata: ISTIO_META_FOO=bar becomes FOO: bar.
	MetaPrefix = "ISTIO_META_"

	DefaultMeshConfigFile = "/etc/istio/config/mesh"
	DefaultPodInfoDir     = "/etc/istio/pod"
	// AnnotationProxyConfig is the per-pod ProxyConfig override (proxy.istio.io/config).
	AnnotationProxyConfig = "proxy.istio.io/config"
	// DefaultProxyBinary is looked up beside the agent's own executable.
	DefaultProxyBinary = "strait-proxy"
	// DefaultReadinessPort serves /healthz/ready for the kubelet (Istio's 15021).
	DefaultReadinessPort = 15021
	// BootstrapFile is written under configPath.
	BootstrapFile = "envoy-rev.json"
	// maxUnixPath is sun_path's size on Linux, including the NUL.
	maxUnixPath = 108
)

// ProxyMode is how the agent runs the proxy.
type ProxyMode string

const (
	// ProxyInProcess runs strait-proxy's code on goroutines of the agent
	// (internal/agent/inprocess): one process, one Go runtime, one
	// binary's pages. binaryPath is not executed.
	ProxyInProcess ProxyMode = "inprocess"
	// ProxyExec executes binaryPath (strait-proxy, or Envoy) as a child
	// process, as pilot-agent does.
	ProxyExec ProxyMode = "exec"
)

// proxyMode resolves STRAIT_PROXY_MODE against binaryPath: unset, a
// binaryPath naming strait-proxy (the default, strait-proxy beside the
// agent) runs in-process and any other (Envoy) is executed; inprocess
// with a binaryPath naming another program is refused, since the agent
// can only run its own strait-proxy.
func proxyMode(v, binaryPath string) (ProxyMode, error) {
	isStrait := filepath.Base(binaryPath) == DefaultProxyBinary
	switch ProxyMode(v) {
	case "":
		if isStrait {
			return ProxyInProcess, nil
		}
		return ProxyExec, nil
	case ProxyExec:
		return ProxyExec, nil
	case ProxyInProcess:
		if !isStrait {
			return "", fmt.Errorf("%s=%s runs the agent's own strait-proxy, but ProxyConfig binaryPath names %q; unset binaryPath, or set %s=%s to execute it",
				EnvProxyMode, ProxyInProcess, binaryPath, EnvProxyMode, ProxyExec)
		}
		return ProxyInProcess, nil
	}
	return "", fmt.Errorf("%s: %q is not %s or %s", EnvProxyMode, v, ProxyInProcess, ProxyExec)
}

// Config is everything `strait-agent proxy sidecar` needs, after defaults.
type Config struct {
	PodName        string
	PodNamespace   string
	InstanceIP     string
	ServiceAccount string
	// Domain is the node id's DNS domain (--domain, default NS.svc.cluster.local).
	Domain string
	// Concurrency is the proxy's worker count (--concurrency, else
	// ProxyConfig.concurrency, else 2).
	Concurrency int
	// Proxy is the merged ProxyConfig. ConfigPath and BinaryPath are absolute.
	Proxy *meshv1alpha1.ProxyConfig
	// ProxyMode is how the proxy runs: in the agent's process or executed
	// (STRAIT_PROXY_MODE, else by binaryPath: proxyMode).
	ProxyMode ProxyMode
	// DNSCapture is ISTIO_META_DNS_CAPTURE (environment or proxyMetadata):
	// the agent serves the pod's DNS on 15053 from straitd's name table.
	DNSCapture bool
	// Metadata holds ISTIO_META_* without the prefix.
	Metadata map[string]string
	// Labels are the pod's labels, from the podinfo volume if mounted.
	Labels map[string]string
	// XDSSocketPath is the absolute path of the xDS proxy's Unix socket.
	XDSSocketPath string
	// ReadinessPort serves /healthz/ready (15021); Proxy.StatusPort (15020)
	// serves merged metrics and /healthz/ready too.
	ReadinessPort int
	// DrainDuration is how long the agent reports not-ready before it
	// stops the proxy on SIGTERM (MINIMUM_DRAIN_DURATION, else
	// ProxyConfig.terminationDrainDuration).
	DrainDuration time.Duration
	// Identity is the workload certificate and TLS settings (loadIdentity).
	Identity Identity
	// ProxyType is the node id's type: sidecar (the default), or router
	// for a gateway (`proxy router`), whose listeners straitd builds from
	// the Gateways that select it.
	ProxyType proxypush.NodeType
	// AppMetrics are the app's metrics endpoints that 15020's
	// /stats/prometheus merges (ISTIO_PROMETHEUS_ANNOTATIONS, set by the
	// injector); none for a gateway, as pilot-agent.
	AppMetrics []promscrape.Target
}

// Sources says where Load reads from. Zero fields take the process's own
// environment and Istio's default paths.
type Sources struct {
	// LookupEnv and Environ default to os.LookupEnv and os.Environ.
	LookupEnv func(string) (string, bool)
	Environ   []string
	// Executable is the agent's own path (default os.Executable()); the
	// default binaryPath is strait-proxy in the same directory.
	Executable string
	// WorkDir resolves a relative configPath (default the process's cwd).
	WorkDir string
	// MeshConfigFile (default /etc/istio/config/mesh) and PodInfoDir
	// (default /etc/istio/pod) are optional: missing files are skipped.
	MeshConfigFile string
	PodInfoDir     string
	// Domain is --domain ("" = NS.svc.cluster.local).
	Domain string
	// ProxyType is the command's argument (`proxy sidecar`, `proxy
	// router`); "" is sidecar.
	ProxyType proxypush.NodeType
	// Concurrency is --concurrency when given on the command line.
	Concurrency *int
}

// Load reads and validates the configuration.
func Load(src Sources) (*Config, error) {
	if src.LookupEnv == nil {
		src.LookupEnv = os.LookupEnv
	}
	if src.Environ == nil {
		src.Environ = os.Environ()
	}
	if src.MeshConfigFile == "" {
		src.MeshConfigFile = DefaultMeshConfigFile
	}
	if src.PodInfoDir == "" {
		src.PodInfoDir = DefaultPodInfoDir
	}
	env := func(k string) string { v, _ := src.LookupEnv(k); return strings.TrimSpace(v) }

	c := &Config{
		PodName:        env(EnvPodName),
		PodNamespace:   env(EnvPodNamespace),
		InstanceIP:     env(EnvInstanceIP),
		ServiceAccount: env(EnvServiceAccount),
		Domain:         src.Domain,
		ProxyType:      cmp.Or(src.ProxyType, proxypush.SidecarProxy),
		Metadata:       map[string]string{},
		ReadinessPort:  DefaultReadinessPort,
	}
	if c.Domain == "" && c.PodNamespace != "" {
		c.Domain = c.PodNamespace + ".svc.cluster.local"
	}
	for _, kv := range src.Environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, MetaPrefix) && len(k) > len(MetaPrefix) {
			c.Metadata[strings.TrimPrefix(k, MetaPrefix)] = v
		}
	}

	var layers []ProxyConfigLayer
	if data, err := os.ReadFile(src.MeshConfigFile); err == nil {
		pc, err := ParseMeshConfigDefaultConfig(src.MeshConfigFile, data)
		if err != nil {
			return nil, err
		}
		layers = append(layers, ProxyConfigLayer{Source: src.MeshConfigFile, Config: pc})
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read mesh config: %w", err)
	}
	if v := env(EnvProxyConfig); v != "" {
		pc, err := ParseProxyConfigJSON(EnvProxyConfig, []byte(v))
		if err != nil {
			return nil, err
		}
		layers = append(layers, ProxyConfigLayer{Source: EnvProxyConfig, Config: pc})
	}
	annotations, err := readDownwardAPI(filepath.Join(src.PodInfoDir, "annotations"))
	if err != nil {
		return nil, err
	}
	if v, ok := annotations[AnnotationProxyConfig]; ok && strings.TrimSpace(v) != "" {
		source := "annotation " + AnnotationProxyConfig
		pc, err := ParseProxyConfigYAML(source, []byte(v))
		if err != nil {
			return nil, err
		}
		if err := CheckAnnotationProxyConfig(pc); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		layers = append(layers, ProxyConfigLayer{Source: source, Config: pc})
	}
	if c.Labels, err = readDownwardAPI(filepath.Join(src.PodInfoDir, "labels")); err != nil {
		return nil, err
	}
	if v := env(EnvMetaJSONLabels); v != "" {
		// pilot-agent's extractAttributesMetadata: the labels as JSON, for
		// a pod without the downward API volume; the volume's labels win.
		var labels map[string]string
		if err := json.Unmarshal([]byte(v), &labels); err != nil {
			return nil, fmt.Errorf("%s: %q is not a JSON object of label strings: %w", EnvMetaJSONLabels, v, err)
		}
		for k, l := range labels {
			if _, ok := c.Labels[k]; !ok {
				c.Labels[k] = l
			}
		}
	}
	c.Proxy = MergeProxyConfig(DefaultProxyConfig(), layers...)

	c.Concurrency = int(c.Proxy.GetConcurrency().GetValue())
	if c.Proxy.GetConcurrency() == nil {
		c.Concurrency = DefaultConcurrency
	}
	if src.Concurrency != nil {
		c.Concurrency = *src.Concurrency
	}

	// Paths: configPath is relative to the working directory (Istio's
	// ./etc/istio/proxy); make it absolute so the bootstrap and the socket
	// do not depend on the proxy's cwd.
	wd := src.WorkDir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
	}
	if !filepath.IsAbs(c.Proxy.ConfigPath) {
		c.Proxy.ConfigPath = filepath.Join(wd, c.Proxy.ConfigPath)
	}
	if c.Proxy.BinaryPath == "" {
		exe := src.Executable
		if exe == "" {
			if exe, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("binaryPath unset and the agent's own path is unknown: %w", err)
			}
		}
		c.Proxy.BinaryPath = filepath.Join(filepath.Dir(exe), DefaultProxyBinary)
	} else if !filepath.IsAbs(c.Proxy.BinaryPath) && strings.ContainsRune(c.Proxy.BinaryPath, filepath.Separator) {
		c.Proxy.BinaryPath = filepath.Join(wd, c.Proxy.BinaryPath)
	}
	if c.ProxyMode, err = proxyMode(env(EnvProxyMode), c.Proxy.BinaryPath); err != nil {
		return nil, err
	}
	c.XDSSocketPath = filepath.Join(c.Proxy.ConfigPath, "XDS")
	if v := env(EnvXDSSocketPath); v != "" {
		c.XDSSocketPath = v
		if !filepath.IsAbs(v) {
			c.XDSSocketPath = filepath.Join(wd, v)
		}
	}

	c.DrainDuration = c.Proxy.GetTerminationDrainDuration().AsDuration()
	if v := env(EnvMinimumDrainDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s: %q is not a non-negative duration (e.g. \"5s\")", EnvMinimumDrainDuration, v)
		}
		c.DrainDuration = d
	}

	if v, ok := src.LookupEnv(promscrape.EnvVar); ok && c.ProxyType == proxypush.SidecarProxy {
		if c.AppMetrics, err = promscrape.AgentTargets(v, int(c.Proxy.GetStatusPort())); err != nil {
			return nil, err
		}
	}
	if err := c.applyDNSCapture(); err != nil {
		return nil, err
	}
	if err := loadIdentity(c, env, wd); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func readDownwardAPI(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pod info: %w", err)
	}
	return ParseDownwardAPIFile(path, data)
}

// Validate reports the first problem, naming the variable or field.
func (c *Config) Validate() error {
	var errs []error
	checkName := func(env, field, v string) {
		switch {
		case v == "":
			errs = append(errs, fmt.Errorf("%s: not set (the pod's %s, from the downward API)", env, field))
		case strings.ContainsAny(v, ".~"):
			errs = append(errs, fmt.Errorf("%s: %q contains '.' or '~', which the node id TYPE~IP~POD.NAMESPACE~DOMAIN cannot carry", env, v))
		}
	}
	checkName(EnvPodName, "metadata.name", c.PodName)
	checkName(EnvPodNamespace, "metadata.namespace", c.PodNamespace)
	switch {
	case c.InstanceIP == "":
		errs = append(errs, fmt.Errorf("%s: not set (the pod's status.podIP, from the downward API)", EnvInstanceIP))
	case net.ParseIP(c.InstanceIP) == nil:
		errs = append(errs, fmt.Errorf("%s: %q is not an IP address", EnvInstanceIP, c.InstanceIP))
	}
	if strings.Contains(c.Domain, "~") {
		errs = append(errs, fmt.Errorf("--domain: %q contains '~'", c.Domain))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("--concurrency: %d is negative (0 means one worker per core)", c.Concurrency))
	}
	if c.Proxy == nil {
		errs = append(errs, errors.New("ProxyConfig: missing"))
	} else {
		if err := validateProxyConfigFields(c.Proxy); err != nil {
			errs = append(errs, fmt.Errorf("ProxyConfig: %w", err))
		}
		if c.Proxy.DiscoveryAddress == "" {
			errs = append(errs, errors.New("ProxyConfig: discoveryAddress: empty"))
		}
		if c.Proxy.ProxyAdminPort == 0 {
			errs = append(errs, errors.New("ProxyConfig: proxyAdminPort: 0 is not a port"))
		}
		if c.Proxy.BinaryPath == "" {
			errs = append(errs, errors.New("ProxyConfig: binaryPath: empty"))
		}
		if !filepath.IsAbs(c.Proxy.ConfigPath) {
			errs = append(errs, fmt.Errorf("ProxyConfig: configPath: %q is not absolute", c.Proxy.ConfigPath))
		}
	}
	if c.ReadinessPort < 1 || c.ReadinessPort > 65535 {
		errs = append(errs, fmt.Errorf("readiness port: %d is not a port (1-65535)", c.ReadinessPort))
	}
	if !filepath.IsAbs(c.XDSSocketPath) {
		errs = append(errs, fmt.Errorf("%s: %q is not absolute", EnvXDSSocketPath, c.XDSSocketPath))
	} else if len(c.XDSSocketPath) >= maxUnixPath {
		errs = append(errs, fmt.Errorf("%s: %q is %d bytes; a Unix socket path must be under %d (set %s or a shorter configPath)",
			EnvXDSSocketPath, c.XDSSocketPath, len(c.XDSSocketPath), maxUnixPath, EnvXDSSocketPath))
	}
	if c.DrainDuration < 0 {
		errs = append(errs, fmt.Errorf("%s: %v is negative", EnvMinimumDrainDuration, c.DrainDuration))
	}
	return errors.Join(errs...)
}

// metaBool reads node metadata KEY as Istio reads its boolean variables
// (strconv.ParseBool): from ISTIO_META_KEY in the environment, else from
// a ProxyConfig layer's proxyMetadata (mesh defaultConfig, PROXY_CONFIG
// or the proxy.istio.io/config annotation; the injector normally turns
// those into environment variables). where says which.
func (c *Config) metaBool(key string) (on bool, where string) {
	for _, src := range []struct{ where, v string }{
		{"environment", c.Metadata[key]},
		{"ProxyConfig proxyMetadata", c.Proxy.GetProxyMetadata()[MetaPrefix+key]},
	} {
		if v, err := strconv.ParseBool(strings.TrimSpace(src.v)); err == nil {
			return v, src.where
		}
	}
	return false, ""
}

// applyDNSCapture sets DNSCapture from ISTIO_META_DNS_CAPTURE and puts it
// in the node metadata, which makes straitd send the name table and use
// the ServiceEntries' allocated addresses for this proxy.
// ISTIO_META_DNS_AUTO_ALLOCATE, Istio's older switch for the allocation,
// needs nothing more: straitd allocates for every DNS-capture proxy, as
// Istio does with PILOT_ENABLE_IP_AUTOALLOCATE (its default).
func (c *Config) applyDNSCapture() error {
	c.DNSCapture, _ = c.metaBool("DNS_CAPTURE")
	if c.DNSCapture {
		c.Metadata["DNS_CAPTURE"] = "true"
	}
	return nil
}

// NodeID is the proxy's node id, TYPE~IP~POD.NS~DOMAIN (TYPE sidecar or
// router).
func (c *Config) NodeID() string {
	return proxypush.TypedNodeID(cmp.Or(c.ProxyType, proxypush.SidecarProxy), c.InstanceIP, c.PodName, c.PodNamespace, c.Domain)
}

// ServiceCluster is node.cluster: APP.NS from the pod's app label
// (or its canonical-name label), else POD.NS.
func (c *Config) ServiceCluster() string {
	app := c.Labels["app"]
	if app == "" {
		app = c.Labels["service.istio.io/canonical-name"]
	}
	if app == "" {
		app = c.PodName
	}
	return app + "." + c.PodNamespace
}

// NodeMetadata is node.metadata's string fields: ISTIO_META_* without the
// prefix (WORKLOAD_NAME, OWNER, CLUSTER_ID, MESH_ID from injection), plus
// NAMESPACE, INSTANCE_IPS, POD_NAME, NAME and SERVICE_ACCOUNT. The pod's
// labels go in as the LABELS struct (bootstrap.Options.Labels), as
// pilot-agent writes them.
func (c *Config) NodeMetadata() map[string]string {
	md := make(map[string]string, len(c.Metadata)+5)
	for k, v := range c.Metadata {
		md[k] = v
	}
	md["NAMESPACE"] = c.PodNamespace
	md["INSTANCE_IPS"] = c.InstanceIP
	md["POD_NAME"] = c.PodName
	// NAME is the instance (pod) name, as pilot-agent writes it from
	// POD_NAME; the peer metadata exchange carries it.
	md["NAME"] = c.PodName
	if c.ServiceAccount != "" {
		md["SERVICE_ACCOUNT"] = c.ServiceAccount
	}
	return md
}

// Locality is the pod's locality from its istio-locality label
// ("region.zone.subzone", as Istio's agent reads it), as
// "region/zone/subzone"; empty without the label, and then straitd takes
// the locality from its registry (the WorkloadEntry's, or in Kubernetes
// the pod's node).
func (c *Config) Locality() string {
	return locality.FromLabel(c.Labels[locality.Label])
}

// BootstrapPath is where the bootstrap is written: configPath/envoy-rev.json.
func (c *Config) BootstrapPath() string { return filepath.Join(c.Proxy.ConfigPath, BootstrapFile) }

// ProxyDrainTime is passed to the proxy as --drain-time-s (ProxyConfig.drainDuration).
func (c *Config) ProxyDrainTime() time.Duration { return c.Proxy.GetDrainDuration().AsDuration() }
