package istioconfig

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/istioconfig/schema"
)

const vsWithTimeout = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: demo}
spec:
  hosts: [echo]
  http:
  - timeout: TIMEOUT
    route:
    - destination: {host: echo}
`

func TestDurationsAsIstioReadsThem(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "1h", want: time.Hour},
		{in: "1m", want: time.Minute},
		{in: "1s", want: time.Second},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "1500ms", want: 1500 * time.Millisecond},
		{in: "0.5s", want: 500 * time.Millisecond},
		{in: "1.5s", want: 1500 * time.Millisecond},
		{in: "1h30m", want: 90 * time.Minute},
		{in: `"2s"`, want: 2 * time.Second},
		{in: "abc", wantErr: `spec.http[0].timeout: "abc" is not a duration (write e.g. 250ms, 1.5s, 1m or 1h)`},
		{in: "10", wantErr: "spec.http[0].timeout: 10 is not a duration: give its unit (e.g. 10s or 10ms)"},
		{in: `"10"`, wantErr: `spec.http[0].timeout: "10" is not a duration`},
		{in: "0s", wantErr: "spec.http[0].timeout: 0s is shorter than 1ms"},
		{in: "500us", wantErr: "spec.http[0].timeout: 500µs is shorter than 1ms"},
		{in: "1.0005s", wantErr: "spec.http[0].timeout: 1.0005s is finer than a millisecond"},
		{in: "-1s", wantErr: "spec.http[0].timeout: -1s is negative"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			// http.timeout is refused until the data plane honours it on
			// every path; the duration is read the same either way.
			res := ParseFileWith("d.yaml", []byte(strings.Replace(vsWithTimeout, "TIMEOUT", tc.in, 1)), ParseOptions{KeepRefused: true})
			if tc.wantErr != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), "d.yaml: document 1: "+tc.wantErr) {
					t.Fatalf("err = %v, want %q", res.Err, tc.wantErr)
				}
				return
			}
			if res.Err != nil || len(res.Configs) != 1 {
				t.Fatalf("err = %v, configs %d", res.Err, len(res.Configs))
			}
			if got := res.Configs[0].VirtualService().Http[0].Timeout.AsDuration(); got != tc.want {
				t.Errorf("timeout = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDurationsEverywhere: Go durations in nested, listed and mapped
// Duration fields, and the per-field exceptions to Istio's 1ms rule.
func TestDurationsEverywhere(t *testing.T) {
	const dr = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr, namespace: demo}
spec:
  host: echo
  trafficPolicy:
    connectionPool:
      tcp: {connectTimeout: 250ms, idleTimeout: IDLE}
      http: {idleTimeout: 1h}
    outlierDetection: {interval: 1m, baseEjectionTime: 1500ms}
    loadBalancer:
      consistentHash:
        httpCookie: {name: c, ttl: TTL}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      outlierDetection: {interval: INTERVAL}
`
	for _, tc := range []struct {
		name, idle, ttl, interval string
		wantErr                   string
	}{
		{name: "ok", idle: "0s", ttl: "0s", interval: "2m"},
		{name: "idle 1ms", idle: "1ms", ttl: "10s", interval: "0.5s"},
		{name: "subset interval", idle: "0s", ttl: "0s", interval: "0.1ms",
			wantErr: "spec.subsets[0].trafficPolicy.outlierDetection.interval: 100µs is shorter than 1ms"},
		{name: "subset interval typo", idle: "0s", ttl: "0s", interval: "5 minutes",
			wantErr: `spec.subsets[0].trafficPolicy.outlierDetection.interval: "5 minutes" is not a duration`},
		{name: "idle sub-ms", idle: "0.5ms", ttl: "0s", interval: "1s",
			wantErr: "spec.trafficPolicy.connectionPool.tcp.idleTimeout: 500µs is shorter than 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.NewReplacer("IDLE", tc.idle, "TTL", tc.ttl, "INTERVAL", tc.interval).Replace(dr)
			errs := invalid(ParseFile("dr.yaml", []byte(y)).Err)
			if tc.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(errs[0], tc.wantErr) {
					t.Fatalf("errors %q, want %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			// trafficPolicy is refused today: decode the spec as the
			// loader does, without the refusal.
			spec := &networking.DestinationRule{}
			decodeSpec(t, y, spec)
			tp := spec.TrafficPolicy
			if got := tp.ConnectionPool.Tcp.ConnectTimeout.AsDuration(); got != 250*time.Millisecond {
				t.Errorf("connectTimeout = %v", got)
			}
			if got := tp.ConnectionPool.Http.IdleTimeout.AsDuration(); got != time.Hour {
				t.Errorf("http idleTimeout = %v", got)
			}
			if got := tp.OutlierDetection.BaseEjectionTime.AsDuration(); got != 1500*time.Millisecond {
				t.Errorf("baseEjectionTime = %v", got)
			}
			want, _ := time.ParseDuration(tc.interval)
			if got := spec.Subsets[0].TrafficPolicy.OutlierDetection.Interval.AsDuration(); got != want {
				t.Errorf("subset interval = %v, want %v", got, want)
			}
		})
	}
}

func TestCorsMaxAgeWholeSeconds(t *testing.T) {
	const vs = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: demo}
spec:
  hosts: [echo]
  http:
  - corsPolicy: {maxAge: MAXAGE}
    route:
    - destination: {host: echo}
`
	for in, wantErr := range map[string]string{
		"1h":     "",
		"24h":    "",
		"1500ms": "spec.http[0].corsPolicy.maxAge: 1.5s is not whole seconds",
	} {
		res := ParseFile("c.yaml", []byte(strings.Replace(vs, "MAXAGE", in, 1)))
		// corsPolicy may be refused as not supported yet; the duration
		// check must still be what this test sees first when it fails.
		var got []string
		for _, fe := range FieldErrors(res.Err) {
			if strings.Contains(fe.Field, "maxAge") {
				got = append(got, fe.Error())
			}
		}
		switch {
		case wantErr == "" && len(got) > 0:
			t.Errorf("maxAge %s: %v", in, got)
		case wantErr != "" && (len(got) == 0 || !strings.Contains(got[0], wantErr)):
			t.Errorf("maxAge %s: got %v, want %q", in, got, wantErr)
		}
	}
}

func TestCheckDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		rule durationRule
		ok   bool
	}{
		{time.Millisecond, atLeastMillisecond, true},
		{time.Millisecond - 1, atLeastMillisecond, false},
		{0, atLeastMillisecond, false},
		{0, zeroOrMillisecond, true},
		{time.Microsecond, zeroOrMillisecond, false},
		{0, anyNonNegative, true},
		{time.Nanosecond, anyNonNegative, true},
		{-time.Nanosecond, anyNonNegative, false},
		{time.Second, wholeSeconds, true},
		{1001 * time.Millisecond, wholeSeconds, false},
		{1001 * time.Millisecond, atLeastMillisecond, true},
	} {
		if got := checkDuration(tc.d, tc.rule) == ""; got != tc.ok {
			t.Errorf("checkDuration(%v, %d) ok = %v, want %v", tc.d, tc.rule, got, tc.ok)
		}
	}
}

// invalid returns the problems of err other than refusals.
func invalid(err error) []string {
	var out []string
	for _, fe := range FieldErrors(err) {
		if !errors.Is(fe, ErrNotSupported) {
			out = append(out, fe.Error())
		}
	}
	return out
}

// decodeSpec decodes a document's spec as parseDocument does.
func decodeSpec(t *testing.T, y string, spec proto.Message) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var doc document
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	norm, err := normalizeDurations("spec", doc.Spec, spec.ProtoReflect().Descriptor())
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(norm, spec); err != nil {
		t.Fatal(err)
	}
}

// TestNoDurationInMaps: normalizeDurations and validateDurations skip map
// values, which is right only while no map of the istio.io/api types
// holds a Duration; an upgrade that adds one fails here.
func TestNoDurationInMaps(t *testing.T) {
	var walk func(path string, md protoreflect.MessageDescriptor, inMap bool, seen map[protoreflect.FullName]bool)
	walk = func(path string, md protoreflect.MessageDescriptor, inMap bool, seen map[protoreflect.FullName]bool) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		defer delete(seen, md.FullName())
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			sub := messageOf(fd)
			if sub == nil {
				continue
			}
			p := path + "." + fd.JSONName()
			if sub.FullName() == durationName && inMap {
				t.Errorf("%s is a Duration inside a map value: teach normalizeDurations and validateDurations maps", p)
			}
			if !isWellKnown(sub) {
				walk(p, sub, inMap || fd.IsMap(), seen)
			}
		}
	}
	for _, kind := range Kinds {
		walk(string(kind), schema.NewSpec(kind).ProtoReflect().Descriptor(), false, map[protoreflect.FullName]bool{})
	}
}

// messageOf is the message type of a field's values (a map's value type),
// or nil.
func messageOf(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		if fd.MapValue().Kind() == protoreflect.MessageKind {
			return fd.MapValue().Message()
		}
		return nil
	}
	if fd.Kind() == protoreflect.MessageKind {
		return fd.Message()
	}
	return nil
}
