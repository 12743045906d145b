package mesh

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/straitmesh/strait/internal/proxypush"
)

const autoMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: app}
spec:
  hosts: [db.example.com, api.example.com]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vip, namespace: app}
spec:
  hosts: [vip.example.com]
  addresses: [240.240.0.10]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: passthrough, namespace: app}
spec:
  hosts: [none.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wild, namespace: app}
spec:
  hosts: ["*.wild.example.com"]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: optout, namespace: app, labels: {networking.istio.io/enable-autoallocate-ip: "False"}}
spec:
  hosts: [optout.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: static, namespace: app}
spec:
  hosts: [static.internal]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
`

// TestAutoAddresses: ServiceEntry hosts without addresses, not wildcards
// and not resolution NONE get an IPv4 address in 240.240.0.0/16 and an
// IPv6 one in 2001:2::/48 at the same offset, distinct per host and never
// one written in a ServiceEntry; the others, and an entry labelled
// networking.istio.io/enable-autoallocate-ip: "false", get none.
func TestAutoAddresses(t *testing.T) {
	snap, problems := buildYAML(t, autoMesh, BuildOptions{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	v4Range, v6Range := netip.MustParsePrefix("240.240.0.0/16"), netip.MustParsePrefix("2001:2::/48")
	seen := map[string]bool{"240.240.0.10": true}
	for _, h := range []string{"db.example.com", "api.example.com", "static.internal"} {
		a := snap.Service(h).AutoAddresses
		if len(a) != 2 {
			t.Fatalf("%s: auto addresses %q, want an IPv4 and an IPv6 one", h, a)
		}
		v4, v6 := netip.MustParseAddr(a[0]), netip.MustParseAddr(a[1])
		if !v4Range.Contains(v4) || !v6Range.Contains(v6) || v4.As4()[3] == 0 || v4.As4()[3] == 255 {
			t.Errorf("%s: auto addresses %q outside the ranges or at .0/.255", h, a)
		}
		if b4, b6 := v4.As4(), v6.As16(); b4[2] != b6[14] || b4[3] != b6[15] {
			t.Errorf("%s: %s and %s are not at the same offset", h, v4, v6)
		}
		if seen[a[0]] {
			t.Errorf("%s: %s given twice", h, a[0])
		}
		seen[a[0]] = true
	}
	for _, h := range []string{"vip.example.com", "none.example.com", "*.wild.example.com", "optout.example.com"} {
		if a := snap.Service(h).AutoAddresses; a != nil {
			t.Errorf("%s: auto addresses %q, want none", h, a)
		}
	}
}

// TestAutoAddressesStable: a rebuild keeps every allocation, also when
// services are added; a service whose allocated address becomes another
// entry's spec.addresses moves, without touching the previous snapshot.
func TestAutoAddressesStable(t *testing.T) {
	first, _ := buildYAML(t, autoMesh, BuildOptions{})
	db := first.Service("db.example.com")
	dbAddr := db.AutoAddresses[0]
	more := autoMesh + `---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: more, namespace: other}
spec:
  hosts: [a1.example.com, a2.example.com, a3.example.com, a4.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`
	second, _ := buildYAML(t, more, BuildOptions{Previous: first})
	for _, h := range []string{"db.example.com", "api.example.com", "static.internal"} {
		if got, want := second.Service(h).AutoAddresses, first.Service(h).AutoAddresses; !slices.Equal(got, want) {
			t.Errorf("%s: %q after adding services, want %q kept", h, got, want)
		}
	}
	taken := more + `---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: taker, namespace: app}
spec:
  hosts: [taker.example.com]
  addresses: [` + dbAddr + `]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`
	third, _ := buildYAML(t, taken, BuildOptions{Previous: second})
	if got := third.Service("db.example.com").AutoAddresses; len(got) != 2 || got[0] == dbAddr {
		t.Errorf("db.example.com: %q after %s was written in another entry, want another address", got, dbAddr)
	}
	if got := db.AutoAddresses[0]; got != dbAddr {
		t.Errorf("the previous snapshot's service changed to %s", got)
	}
}

// TestAutoAddressScope: a DNS-capture proxy's scope holds the services
// with their allocated address of the proxy's family as Addresses; other
// proxies see the services as written.
func TestAutoAddressScope(t *testing.T) {
	snap, _ := buildYAML(t, autoMesh, BuildOptions{})
	auto := snap.Service("db.example.com").AutoAddresses
	addrsIn := func(sc *Scope, host string) []string {
		for _, svc := range sc.Services {
			if svc.Hostname == host {
				return svc.Addresses
			}
		}
		t.Fatalf("%s not in scope %s", host, sc.Key)
		return nil
	}
	capture := map[string]string{"DNS_CAPTURE": "true"}
	for _, tc := range []struct {
		name  string
		proxy *proxypush.Proxy
		want  []string
	}{
		{"no capture", &proxypush.Proxy{IP: "10.0.0.9", Namespace: "app"}, nil},
		{"capture off", &proxypush.Proxy{IP: "10.0.0.9", Namespace: "app", Metadata: map[string]string{"DNS_CAPTURE": "false"}}, nil},
		{"capture IPv4", &proxypush.Proxy{IP: "10.0.0.9", Namespace: "app", Metadata: capture}, auto[:1]},
		{"capture IPv6", &proxypush.Proxy{IP: "fd00::9", Namespace: "app", Metadata: capture}, auto[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := snap.ProxyScope(tc.proxy)
			if got := addrsIn(sc, "db.example.com"); !slices.Equal(got, tc.want) {
				t.Errorf("db.example.com addresses %q, want %q", got, tc.want)
			}
			if got := addrsIn(sc, "vip.example.com"); !slices.Equal(got, []string{"240.240.0.10"}) {
				t.Errorf("vip.example.com addresses %q, want its own", got)
			}
			if got := addrsIn(sc, "none.example.com"); got != nil {
				t.Errorf("none.example.com addresses %q, want none", got)
			}
		})
	}
	if snap.Service("db.example.com").Addresses != nil {
		t.Error("the snapshot's service got the allocated address")
	}
}
