package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	istioanno "istio.io/api/annotation"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/agent/settings"
)

// Annotation names used outside the validators.
var (
	annoSidecarStatus       = istioanno.SidecarStatus.Name
	annoProxyConfig         = istioanno.ProxyConfig.Name
	annoProxyCPU            = istioanno.SidecarProxyCPU.Name
	annoProxyCPULimit       = istioanno.SidecarProxyCPULimit.Name
	annoProxyMemory         = istioanno.SidecarProxyMemory.Name
	annoProxyMemoryLimit    = istioanno.SidecarProxyMemoryLimit.Name
	annoProxyImage          = istioanno.SidecarProxyImage.Name
	annoNativeSidecar       = istioanno.SidecarNativeSidecar.Name
	annoUserVolume          = istioanno.SidecarUserVolume.Name
	annoUserVolumeMount     = istioanno.SidecarUserVolumeMount.Name
	annoStatusPort          = istioanno.SidecarStatusPort.Name
	annoPrometheusMerge     = istioanno.PrometheusMergeMetrics.Name
	annoDefaultContainer    = "kubectl.kubernetes.io/default-container"
	annoDefaultLogContainer = "kubectl.kubernetes.io/default-logs-container"
	annoInjectTemplates     = "inject.istio.io/templates"
)

// AnnotationError is an annotation whose value is not of the expected form.
// Its message names the annotation, the value and what would be right:
//
//	annotation sidecar.istio.io/proxyCPU: "abc" is not a CPU quantity (e.g. "500m")
type AnnotationError struct {
	Name  string
	Value string
	// Expected completes "is not …": `a CPU quantity (e.g. "500m")`.
	Expected string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s: %q is not %s", e.Name, e.Value, e.Expected)
}

// validator checks one annotation's value; it returns what was expected
// (the text after "is not") or "" when the value is fine.
type validator func(value string) (expected string)

// annotationValidators covers every sidecar.istio.io/*,
// traffic.sidecar.istio.io/*, readiness.status.sidecar.istio.io/*,
// status.sidecar.istio.io/port and proxy.istio.io/config annotation that
// istio.io/api knows (TestValidatorsCoverKnownAnnotations keeps that true).
var annotationValidators = map[string]validator{
	istioanno.SidecarInject.Name:                validBool,
	istioanno.SidecarNativeSidecar.Name:         validBool,
	istioanno.SidecarRewriteAppHTTPProbers.Name: validBool,
	istioanno.PrometheusMergeMetrics.Name:       validBool,
	istioanno.SidecarInterceptionMode.Name:      validInterceptionMode,
	istioanno.SidecarStatusPort.Name:            validPortOrZero,

	istioanno.SidecarStatusReadinessApplicationPorts.Name:    validPortList(false),
	istioanno.SidecarStatusReadinessFailureThreshold.Name:    validPositiveInt,
	istioanno.SidecarStatusReadinessInitialDelaySeconds.Name: validNonNegativeInt,
	istioanno.SidecarStatusReadinessPeriodSeconds.Name:       validPositiveInt,

	istioanno.SidecarTrafficIncludeInboundPorts.Name:     validPortList(true),
	istioanno.SidecarTrafficExcludeInboundPorts.Name:     validPortList(false),
	istioanno.SidecarTrafficIncludeOutboundPorts.Name:    validPortList(false),
	istioanno.SidecarTrafficExcludeOutboundPorts.Name:    validPortList(false),
	istioanno.SidecarTrafficIncludeOutboundIPRanges.Name: validCIDRList(true),
	istioanno.SidecarTrafficExcludeOutboundIPRanges.Name: validCIDRList(false),
	istioanno.SidecarTrafficExcludeInterfaces.Name:       validInterfaceList,
	istioanno.SidecarTrafficKubevirtInterfaces.Name:      validInterfaceList,

	istioanno.SidecarProxyCPU.Name:         validCPU,
	istioanno.SidecarProxyCPULimit.Name:    validCPU,
	istioanno.SidecarProxyMemory.Name:      validMemory,
	istioanno.SidecarProxyMemoryLimit.Name: validMemory,
	istioanno.SidecarProxyImage.Name:       validImage,
	istioanno.SidecarProxyImageType.Name:   validOneOf("default", "debug", "distroless"),

	istioanno.SidecarLogLevel.Name:          validProxyLogLevel,
	istioanno.SidecarComponentLogLevel.Name: validComponentLogLevel,
	istioanno.SidecarAgentLogLevel.Name:     validAgentLogLevel,

	istioanno.SidecarBootstrapOverride.Name: validDNSLabel,
	istioanno.SidecarDiscoveryAddress.Name:  validHostPort,
	istioanno.SidecarUserVolume.Name:        validUserVolume,
	istioanno.SidecarUserVolumeMount.Name:   validUserVolumeMount,

	istioanno.SidecarExtraStatTags.Name:          validNameList,
	istioanno.SidecarStatsInclusionPrefixes.Name: validAny,
	istioanno.SidecarStatsInclusionSuffixes.Name: validAny,
	istioanno.SidecarStatsInclusionRegexps.Name:  validRegexpList,
	istioanno.SidecarStatsHistogramBuckets.Name:  validHistogramBuckets,
	istioanno.SidecarStatsHistogramBins.Name:     validPositiveInt,
	istioanno.SidecarStatsFlushInterval.Name:     validDuration,
	istioanno.SidecarStatsEvictionInterval.Name:  validDuration,
	istioanno.SidecarStatsCompression.Name:       validOneOf("gzip", "zstd", "brotli", "none"),

	// Written by the injector itself: a pod that carries it is skipped by
	// the policy before validation runs.
	istioanno.SidecarStatus.Name:  validAny,
	istioanno.ProxyOverrides.Name: validAny,

	istioanno.ProxyConfig.Name: validProxyConfig,
}

// ValidateAnnotations checks every known injection annotation of a pod
// (injection step 2). It returns all problems, each an *AnnotationError, joined.
func ValidateAnnotations(annotations map[string]string) error {
	var errs []error
	for _, name := range sortedKeys(annotations) {
		v, ok := annotationValidators[name]
		if !ok {
			continue
		}
		if expected := v(annotations[name]); expected != "" {
			errs = append(errs, &AnnotationError{Name: name, Value: annotations[name], Expected: expected})
		}
	}
	if cpu, ok := annotations[annoProxyCPU]; ok {
		if limit, ok := annotations[annoProxyCPULimit]; ok {
			errs = append(errs, requestNotOverLimit(annoProxyCPU, cpu, annoProxyCPULimit, limit))
		}
	}
	if mem, ok := annotations[annoProxyMemory]; ok {
		if limit, ok := annotations[annoProxyMemoryLimit]; ok {
			errs = append(errs, requestNotOverLimit(annoProxyMemory, mem, annoProxyMemoryLimit, limit))
		}
	}
	return errors.Join(errs...)
}

func requestNotOverLimit(reqName, req, limName, lim string) error {
	r, err1 := resource.ParseQuantity(req)
	l, err2 := resource.ParseQuantity(lim)
	if err1 != nil || err2 != nil || r.Cmp(l) <= 0 {
		return nil
	}
	return &AnnotationError{Name: reqName, Value: req, Expected: fmt.Sprintf("at most %s (%q)", limName, lim)}
}

func validAny(string) string { return "" }

func validBool(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "false", "y", "yes", "n", "no", "on", "off":
		return ""
	}
	return `a boolean ("true" or "false")`
}

func validInterceptionMode(s string) string {
	if _, ok := meshv1alpha1.ProxyConfig_InboundInterceptionMode_value[s]; ok {
		return ""
	}
	return `an interception mode ("REDIRECT", "TPROXY" or "NONE")`
}

func parsePort(s string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	return n, err == nil && n >= 0 && n <= 65535
}

func validPortOrZero(s string) string {
	if _, ok := parsePort(s); ok {
		return ""
	}
	return `a port number from 0 to 65535 (e.g. "15020"; 0 turns the status port off)`
}

// validPortList accepts "", a comma-separated list of ports 1-65535, and
// "*" when star is allowed.
func validPortList(star bool) validator {
	return func(s string) string {
		if star && strings.TrimSpace(s) == "*" {
			return ""
		}
		for _, p := range splitList(s) {
			if n, ok := parsePort(p); !ok || n == 0 {
				if star {
					return `"*" or a comma-separated list of ports (e.g. "80,8080")`
				}
				return `a comma-separated list of ports (e.g. "80,8080")`
			}
		}
		return ""
	}
}

// validCIDRList accepts "", a comma-separated list of CIDRs, and "*" when
// star is allowed.
func validCIDRList(star bool) validator {
	return func(s string) string {
		if star && strings.TrimSpace(s) == "*" {
			return ""
		}
		for _, c := range splitList(s) {
			if _, err := netip.ParsePrefix(c); err != nil {
				if star {
					return `"*" or a comma-separated list of CIDRs (e.g. "10.0.0.0/8,172.16.0.0/12")`
				}
				return `a comma-separated list of CIDRs (e.g. "10.0.0.0/8,172.16.0.0/12")`
			}
		}
		return ""
	}
}

var interfaceName = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,15}$`)

func validInterfaceList(s string) string {
	for _, n := range splitList(s) {
		if !interfaceName.MatchString(n) {
			return `a comma-separated list of interface names (e.g. "eth1,net1")`
		}
	}
	return ""
}

func validPositiveInt(s string) string {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31)
	if err != nil || n == 0 {
		return `a positive integer (e.g. "30")`
	}
	return ""
}

func validNonNegativeInt(s string) string {
	if _, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31); err != nil {
		return `a non-negative integer (e.g. "1")`
	}
	return ""
}

func validCPU(s string) string {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return `a CPU quantity (e.g. "500m")`
	}
	return ""
}

func validMemory(s string) string {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return `a memory quantity (e.g. "128Mi")`
	}
	return ""
}

var imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`)

func validImage(s string) string {
	if !imageRef.MatchString(s) {
		return `an image reference (e.g. "strait/proxy:latest")`
	}
	return ""
}

func validOneOf(allowed ...string) validator {
	return func(s string) string {
		if slices.Contains(allowed, s) {
			return ""
		}
		return "one of " + strings.Join(quoteAll(allowed), ", ")
	}
}

var proxyLogLevels = []string{"trace", "debug", "info", "warning", "warn", "error", "critical", "off"}

func validProxyLogLevel(s string) string {
	if slices.Contains(proxyLogLevels, s) {
		return ""
	}
	return "a proxy log level (" + strings.Join(quoteAll(proxyLogLevels), ", ") + ")"
}

var componentName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// validComponentLogLevel: "misc:error,upstream:debug".
func validComponentLogLevel(s string) string {
	const want = `a comma-separated list of component:level (e.g. "misc:error,upstream:debug")`
	items := splitList(s)
	if len(items) == 0 {
		return want
	}
	for _, item := range items {
		comp, level, ok := strings.Cut(item, ":")
		if !ok || !componentName.MatchString(comp) || !slices.Contains(proxyLogLevels, level) {
			return want
		}
	}
	return ""
}

var agentLogLevels = []string{"debug", "info", "warn", "error", "fatal", "none"}

// validAgentLogLevel: "info" or "default:info,xds:debug".
func validAgentLogLevel(s string) string {
	const want = `a log level or a comma-separated list of scope:level (e.g. "default:info,xds:debug")`
	items := splitList(s)
	if len(items) == 0 {
		return want
	}
	for _, item := range items {
		scope, level, ok := strings.Cut(item, ":")
		if !ok {
			scope, level = "default", item
		}
		if !componentName.MatchString(scope) || !slices.Contains(agentLogLevels, level) {
			return want
		}
	}
	return ""
}

func validDNSLabel(s string) string {
	if len(validation.IsDNS1123Subdomain(s)) > 0 {
		return `a ConfigMap name (e.g. "my-bootstrap")`
	}
	return ""
}

func validHostPort(s string) string {
	host, port, ok := strings.Cut(s, ":")
	if n, portOK := parsePort(port); !ok || host == "" || strings.ContainsAny(host, " /\t\n") || !portOK || n == 0 {
		return `a host:port address (e.g. "istiod.istio-system.svc:15012")`
	}
	return ""
}

func validUserVolume(s string) string {
	if _, err := parseUserVolumes(s); err != nil {
		return `a JSON list of volumes or a JSON object from volume name to volume (e.g. {"certs":{"secret":{"secretName":"certs"}}})`
	}
	return ""
}

func validUserVolumeMount(s string) string {
	if _, err := parseUserVolumeMounts(s); err != nil {
		return `a JSON list of volume mounts or a JSON object from volume name to mount (e.g. {"certs":{"mountPath":"/etc/certs","readonly":true}})`
	}
	return ""
}

var tagName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func validNameList(s string) string {
	for _, n := range splitList(s) {
		if !tagName.MatchString(n) {
			return `a comma-separated list of tag names (e.g. "destination_port,request_protocol")`
		}
	}
	return ""
}

func validRegexpList(s string) string {
	for _, r := range splitList(s) {
		if _, err := regexp.Compile(r); err != nil {
			return `a comma-separated list of regular expressions (e.g. "http.*\.rq_total")`
		}
	}
	return ""
}

func validHistogramBuckets(s string) string {
	var m map[string][]float64
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return `a JSON object from stat prefix to bucket list (e.g. {"istiocustom":[1,5,10,50]})`
	}
	return ""
}

func validDuration(s string) string {
	if d, err := time.ParseDuration(s); err != nil || d <= 0 {
		return `a duration (e.g. "30s")`
	}
	return ""
}

func validProxyConfig(s string) string {
	pc, err := parseProxyConfig(s)
	if err != nil {
		return "a ProxyConfig in YAML or JSON (" + err.Error() + `; e.g. "concurrency: 2")`
	}
	if err := settings.CheckAnnotationProxyConfig(pc); err != nil {
		return "a ProxyConfig Strait honours per pod (" + err.Error() + ")"
	}
	return ""
}

// parseProxyConfig reads a ProxyConfig written as YAML or JSON, refusing
// unknown fields.
func parseProxyConfig(s string) (*meshv1alpha1.ProxyConfig, error) {
	js, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, err
	}
	pc := &meshv1alpha1.ProxyConfig{}
	if t := strings.TrimSpace(string(js)); t == "" || t == "null" {
		return pc, nil
	}
	if err := protojson.Unmarshal(js, pc); err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), "\u00a0", " "))
	}
	return pc, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = strconv.Quote(x)
	}
	return out
}
