package meshview

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Sample
	}{
		{
			name: "labels, comments, timestamp",
			in: "# HELP istio_requests_total x\n# TYPE istio_requests_total counter\n" +
				`istio_requests_total{reporter="destination",response_code="200"} 12 1700000000000` + "\n\n" +
				"other_metric 3\n",
			want: []Sample{{Name: "istio_requests_total", Labels: map[string]string{"reporter": "destination", "response_code": "200"}, Value: 12}},
		},
		{
			name: "escapes and spaces",
			in:   `istio_requests_total{ a="x\"y" , b="back\\slash",c="new\nline",} 1.5e1`,
			want: []Sample{{Name: "istio_requests_total", Labels: map[string]string{"a": `x"y`, "b": `back\slash`, "c": "new\nline"}, Value: 15}},
		},
		{
			name: "infinite bound",
			in:   `istio_request_duration_milliseconds_bucket{le="+Inf"} +Inf`,
			want: []Sample{{Name: "istio_request_duration_milliseconds_bucket", Labels: map[string]string{"le": "+Inf"}, Value: math.Inf(1)}},
		},
		{
			name: "no labels",
			in:   "istio_requests_total 7",
			want: []Sample{{Name: "istio_requests_total", Labels: map[string]string{}, Value: 7}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseText(strings.NewReader(tt.in), wantedMetric)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseTextErrors(t *testing.T) {
	for _, in := range []string{
		`istio_requests_total{a="b"`,
		`istio_requests_total{a=b} 1`,
		`istio_requests_total{a="b} 1`,
		`istio_requests_total{a="b"} one`,
		`istio_requests_total{a="b"}`,
		`istio_requests_total 1 2 3`,
	} {
		if _, err := ParseText(strings.NewReader(in), nil); err == nil {
			t.Errorf("%q: no error", in)
		} else if !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: error %v does not name the line", in, err)
		}
	}
	// A metric the filter drops is not parsed at all.
	if _, err := ParseText(strings.NewReader("envoy_cluster_x{bad 1\n"), wantedMetric); err != nil {
		t.Errorf("filtered line: %v", err)
	}
}

// FuzzParseText: a proxy's answer is untrusted input; ParseText must not
// panic, and what it returns must be what it was asked for.
func FuzzParseText(f *testing.F) {
	f.Add(`istio_requests_total{reporter="destination",response_code="200"} 12`)
	f.Add(`istio_request_duration_milliseconds_bucket{le="+Inf",a="\"\\"} 3 17`)
	f.Add("# comment\n\nistio_requests_total 1")
	f.Fuzz(func(t *testing.T, in string) {
		samples, err := ParseText(strings.NewReader(in), wantedMetric)
		if err != nil {
			return
		}
		for _, s := range samples {
			if !wantedMetric(s.Name) {
				t.Fatalf("sample %q passed the filter", s.Name)
			}
		}
		_ = countersFromSamples(samples)
	})
}
