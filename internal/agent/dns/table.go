package dns

import (
	"net/netip"
	"strings"

	mdns "github.com/miekg/dns"

	"github.com/straitmesh/strait/internal/nds"
)

// host is one name the table answers, with the addresses of its service.
type host struct {
	// canonical is the service's full name, with the trailing dot.
	canonical string
	v4, v6    []netip.Addr
}

// table is the lookup table built from a NameTable: every full name and,
// for Kubernetes services of the pod's cluster domain, the short forms a
// pod may ask for (name.ns, name.ns.svc and, in the pod's own namespace,
// name) — the names Istio's agent adds (pkg/dns/client, generateAltHosts).
// It is immutable once built.
type table struct {
	names map[string]*host // lower-case, with the trailing dot
}

// buildTable builds the lookup table for a pod in namespace ns of cluster
// domain clusterDomain (e.g. "cluster.local"). Addresses that do not parse
// are left out.
func buildTable(nt nds.NameTable, ns, clusterDomain string) *table {
	t := &table{names: make(map[string]*host, len(nt))}
	svcSuffix := ".svc." + strings.ToLower(strings.Trim(clusterDomain, ".")) + "."
	for name, ni := range nt {
		h := &host{canonical: mdns.Fqdn(strings.ToLower(name))}
		for _, s := range ni.IPs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			if a.Unmap().Is4() {
				h.v4 = append(h.v4, a.Unmap())
			} else {
				h.v6 = append(h.v6, a)
			}
		}
		t.names[h.canonical] = h
		if ni.Registry != nds.RegistryKubernetes || ni.Shortname == "" || ni.Namespace == "" ||
			h.canonical != strings.ToLower(ni.Shortname+"."+ni.Namespace)+svcSuffix {
			continue
		}
		short := strings.ToLower(ni.Shortname + "." + ni.Namespace)
		t.addAlias(short+".", h)
		t.addAlias(short+".svc.", h)
		if ni.Namespace == ns {
			t.addAlias(strings.ToLower(ni.Shortname)+".", h)
		}
	}
	return t
}

// addAlias adds an alternative name unless a full name already has it.
func (t *table) addAlias(name string, h *host) {
	if old, ok := t.names[name]; ok && old.canonical == name {
		return
	}
	t.names[name] = h
}

// lookup finds qname (any case, with the trailing dot). When qname itself
// is unknown but is a known name with one of the pod's search domains
// appended — what a resolver asks first for "name.ns" under ndots:5 — it
// returns that host and alias=true, and the answer carries a CNAME from
// qname to the host's full name.
func (t *table) lookup(qname string, search []string) (h *host, alias bool) {
	qname = strings.ToLower(qname)
	if h := t.names[qname]; h != nil {
		return h, false
	}
	for _, s := range search {
		suffix := "." + s
		if !strings.HasSuffix(qname, suffix) || len(qname) == len(suffix) {
			continue
		}
		if h := t.names[qname[:len(qname)-len(suffix)+1]]; h != nil {
			return h, true
		}
	}
	return nil, false
}
