package meshconfig

import (
	"strings"
	"testing"
)

func TestLocalityLbSetting(t *testing.T) {
	if s := Default().LocalityLbSetting; s == nil || !s.GetEnabled().GetValue() {
		t.Fatalf("default localityLbSetting %v, want enabled as Istio's default mesh config", s)
	}
	c, err := Parse([]byte("localityLbSetting: {enabled: false}\n"))
	if err != nil || c.LocalityLbSetting != nil {
		t.Fatalf("disabled: %v, %v", c, err)
	}
	c, err = Parse([]byte("localityLbSetting:\n  failover: [{from: us, to: eu}]\n"))
	if err != nil || len(c.LocalityLbSetting.GetFailover()) != 1 {
		t.Fatalf("failover: %v, %v", c, err)
	}
	_, err = Parse([]byte("localityLbSetting:\n  distribute: [{from: us, to: {us: 10}}]\n"))
	if err == nil || !strings.Contains(err.Error(), "mesh config: localityLbSetting.distribute[0].to: the weights add up to 10") {
		t.Fatalf("bad distribute: %v", err)
	}
}
