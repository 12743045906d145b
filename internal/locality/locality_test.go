package locality

import (
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
)

func TestParseAndString(t *testing.T) {
	for _, s := range []string{"", "r", "r/z", "r/z/s"} {
		if got := Parse(s).String(); got != s {
			t.Errorf("Parse(%q).String() = %q", s, got)
		}
	}
	if l := Parse("r/z/s/x"); l.Subzone != "s/x" {
		t.Errorf("a fourth part stays in the subzone: %+v", l)
	}
	if got := (Locality{Region: "r", Subzone: "s"}).String(); got != "r//s" {
		t.Errorf("empty zone with a subzone: %q", got)
	}
}

func TestFromLabels(t *testing.T) {
	if got := FromLabel("us.us-a.rack1"); got != "us/us-a/rack1" {
		t.Errorf("FromLabel = %q", got)
	}
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{RegionLabel: "us", ZoneLabel: "us-a"}, "us/us-a"},
		{map[string]string{RegionLabel: "us", ZoneLabel: "us-a", SubzoneLabel: "s"}, "us/us-a/s"},
		{map[string]string{betaRegionLabel: "eu", betaZoneLabel: "eu-b"}, "eu/eu-b"},
		{map[string]string{RegionLabel: "us", betaRegionLabel: "eu", ZoneLabel: "us-a", betaZoneLabel: "eu-b"}, "us/us-a"},
		{map[string]string{Label: "us.us-a", "app": "x"}, ""}, // a node's istio-locality label means nothing
	} {
		if got := FromNodeLabels(c.labels); got != c.want {
			t.Errorf("FromNodeLabels(%v) = %q, want %q", c.labels, got, c.want)
		}
	}
}

func TestMatches(t *testing.T) {
	l := Parse("us/us-a/s1")
	for _, c := range []struct {
		pattern string
		want    bool
	}{
		{"us", true}, {"us/*", true}, {"*", true}, {"us/us-a", true}, {"us/us-a/s1", true},
		{"us/us-a/*", true}, {"us/us-b", false}, {"eu", false}, {"us/us-a/s2", false}, {"*/us-b", false},
	} {
		if got := l.Matches(c.pattern); got != c.want {
			t.Errorf("%v.Matches(%q) = %v", l, c.pattern, got)
		}
	}
	if (Locality{}).Matches("us") {
		t.Error("an unknown locality matched a region")
	}
}

func TestPriority(t *testing.T) {
	p := Parse("us/a/s")
	for ep, want := range map[string]int{"us/a/s": 0, "us/a/t": 1, "us/a": 1, "us/b/s": 2, "eu/a/s": 3, "": 3} {
		if got := Priority(p, Parse(ep)); got != want {
			t.Errorf("Priority(us/a/s, %q) = %d, want %d", ep, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	dist := func(from string, to map[string]uint32) *networking.LocalityLoadBalancerSetting_Distribute {
		return &networking.LocalityLoadBalancerSetting_Distribute{From: from, To: to}
	}
	for _, c := range []struct {
		name string
		s    *networking.LocalityLoadBalancerSetting
		want string // "" valid; else the start of the error
	}{
		{"nil", nil, ""},
		{"distribute", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("us/*", map[string]uint32{"us/*": 80, "eu/a": 20})}}, ""},
		{"failover", &networking.LocalityLoadBalancerSetting{Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us", To: "eu"}},
			FailoverPriority: []string{"rack", "zone=a"}}, ""},
		{"both", &networking.LocalityLoadBalancerSetting{
			Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{dist("us", map[string]uint32{"us": 100})},
			Failover:   []*networking.LocalityLoadBalancerSetting_Failover{{From: "us", To: "eu"}}}, "x: distribute and failover"},
		{"sum", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("us", map[string]uint32{"us": 80, "eu": 10})}}, "x.distribute[0].to: the weights add up to 90"},
		{"duplicate from", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("us", map[string]uint32{"us": 100}), dist("us", map[string]uint32{"us": 100})}}, "x.distribute[1].from"},
		{"null distribute", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{nil}}, "x.distribute[0]: must not be null"},
		{"empty from", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("", map[string]uint32{"us": 100})}}, "x.distribute[0].from: must be set"},
		{"inner wildcard", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("*/a", map[string]uint32{"us": 100})}}, "x.distribute[0].from: \"*/a\""},
		{"partial wildcard", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("us", map[string]uint32{"us/a*": 100})}}, "x.distribute[0].to: \"us/a*\""},
		{"empty part", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("us//a", map[string]uint32{"us": 100})}}, "x.distribute[0].from: \"us//a\" has an empty part"},
		{"too deep", &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
			dist("a/b/c/d", map[string]uint32{"us": 100})}}, "x.distribute[0].from: \"a/b/c/d\" has more"},
		{"same region", &networking.LocalityLoadBalancerSetting{Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us", To: "us"}}}, "x.failover[0]: from and to are both"},
		{"zone in failover", &networking.LocalityLoadBalancerSetting{Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us/a", To: "eu"}}}, "x.failover[0].from"},
		{"empty to", &networking.LocalityLoadBalancerSetting{Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us"}}}, "x.failover[0].to"},
		{"null failover", &networking.LocalityLoadBalancerSetting{Failover: []*networking.LocalityLoadBalancerSetting_Failover{nil}}, "x.failover[0]: must not be null"},
		{"empty priority label", &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"a", ""}}, "x.failoverPriority[1]"},
	} {
		err := Validate("x", c.s)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one starting %q", c.name, err, c.want)
		}
	}
}
