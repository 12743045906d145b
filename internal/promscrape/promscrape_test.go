package promscrape

import (
	"reflect"
	"strings"
	"testing"
)

func TestFromAnnotations(t *testing.T) {
	c, err := FromAnnotations(map[string]string{
		"prometheus.io/port": "8080", "prometheus_io_path": "/m", "prometheus.io/scrape": "true",
		"prometheus.istio.io/scrape-targets": " 9090 , 9091:/other ,", "unrelated": "x",
	})
	want := Config{Scrape: "true", Port: "8080", Path: "/m", Targets: []Target{{"9090", "/metrics"}, {"9091", "/other"}}}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("FromAnnotations = %+v, %v; want %+v", c, err, want)
	}
	if _, err := FromAnnotations(map[string]string{AnnotationTargets: ":/x"}); err == nil || !strings.Contains(err.Error(), "no port") {
		t.Errorf("a target without a port: %v", err)
	}
	if c, _ := FromAnnotations(map[string]string{"app": "x"}); !c.IsEmpty() {
		t.Errorf("no scrape annotations should be empty: %+v", c)
	}
}

func TestForInjection(t *testing.T) {
	for _, tc := range []struct {
		in      Config
		want    Config
		wantErr string
	}{
		{in: Config{Port: "8080"}, want: Config{Port: "8080"}},
		{in: Config{Targets: []Target{{"9090", "/a"}, {"9091", "/b"}}}, want: Config{Port: "9090", Path: "/a", Targets: []Target{{"9090", "/a"}, {"9091", "/b"}}}},
		{in: Config{Port: "15020"}, wantErr: "status port"},
		{in: Config{Port: "15090"}, wantErr: "reserved for Istio"},
		{in: Config{Port: "http"}, wantErr: `invalid port "http"`},
		{in: Config{Targets: []Target{{"9090", "/a"}, {"15000", "/b"}}}, wantErr: "Envoy admin"},
	} {
		got, err := tc.in.ForInjection(15020)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestAgentTargets(t *testing.T) {
	for _, tc := range []struct {
		env     string
		want    []Target
		wantErr string
	}{
		{env: `{"scrape":"","path":"","port":"8080"}`, want: []Target{{"8080", "/metrics"}}},
		{env: `{"scrape":"true","path":"/m","port":""}`, want: []Target{{"80", "/m"}}},
		{env: `{"scrape":"false","port":"8080"}`},
		{env: `{"port":"9090","path":"/a","targets":[{"port":"9090","path":"/a"},{"port":"9091","path":""}]}`, want: []Target{{"9090", "/a"}, {"9091", "/metrics"}}},
		{env: `{"port":"15020"}`, wantErr: "loop"},
		{env: `{"port":"7000"}`, want: []Target{{"7000", "/metrics"}}},
		{env: `port=8080`, wantErr: EnvVar},
	} {
		got, err := AgentTargets(tc.env, 15020)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
	// Another status port frees 15020's check but not the reserved list.
	if _, err := AgentTargets(`{"port":"15020"}`, 16020); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("15020 with status port 16020: %v", err)
	}
}
