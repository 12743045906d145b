package inject

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

func TestEstimateConcurrency(t *testing.T) {
	defaults := DefaultSettings().Values
	requestOnly, _ := ParseValues([]byte("global: {proxy: {resources: {requests: {cpu: 1500m}}}}"))
	pc := func(n int32) *meshv1alpha1.ProxyConfig {
		return &meshv1alpha1.ProxyConfig{Concurrency: wrapperspb.Int32(n)}
	}
	cases := []struct {
		name   string
		pc     *meshv1alpha1.ProxyConfig
		annos  map[string]string
		values Values
		want   int
	}{
		{"proxyCPULimit 3500m", nil, map[string]string{"sidecar.istio.io/proxyCPULimit": "3500m"}, defaults, 4},
		{"proxyCPU 500m", nil, map[string]string{"sidecar.istio.io/proxyCPU": "500m"}, defaults, 1},
		{"neither: the values' limit (2000m)", nil, nil, defaults, 2},
		{"limit over request", nil, map[string]string{"sidecar.istio.io/proxyCPU": "500m", "sidecar.istio.io/proxyCPULimit": "3"}, defaults, 3},
		{"tiny is at least 1", nil, map[string]string{"sidecar.istio.io/proxyCPULimit": "1m"}, defaults, 1},
		{"ProxyConfig wins", pc(5), map[string]string{"sidecar.istio.io/proxyCPULimit": "3500m"}, defaults, 5},
		{"ProxyConfig 0 means estimate", pc(0), map[string]string{"sidecar.istio.io/proxyCPU": "2500m"}, defaults, 3},
		{"values request when no limit", nil, nil, requestOnly, 2},
		{"nothing at all", nil, nil, Values{}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := EstimateConcurrency(tc.pc, tc.annos, tc.values); got != tc.want {
				t.Errorf("EstimateConcurrency = %d, want %d", got, tc.want)
			}
		})
	}
}
