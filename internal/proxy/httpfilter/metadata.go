package httpfilter

// Metadata is one request's dynamic metadata: what an earlier filter
// learned about the request (the verified claims of a JWT) for a later one
// (RBAC) to match on. As in Envoy, values are grouped by a namespace, the
// name of the filter that wrote them ("istio_authn",
// "envoy.filters.http.jwt_authn"), then by key. The zero value is empty and
// ready to use; a nil *Metadata reads as empty, so a filter that only reads
// need not check for it. It is not safe for concurrent use: a request's
// filters run one after the other.
type Metadata struct {
	ns map[string]map[string]any
}

// Set records value under namespace and key, replacing an earlier value.
func (m *Metadata) Set(namespace, key string, value any) {
	if m.ns == nil {
		m.ns = make(map[string]map[string]any)
	}
	kv := m.ns[namespace]
	if kv == nil {
		kv = make(map[string]any)
		m.ns[namespace] = kv
	}
	kv[key] = value
}

// Get returns the value under namespace and key, and whether it is set.
func (m *Metadata) Get(namespace, key string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.ns[namespace][key]
	return v, ok
}

// maxKeptNamespaces bounds the namespaces' maps Reset keeps for reuse.
const maxKeptNamespaces = 16

// Reset empties m for the next request, keeping its maps (up to
// maxKeptNamespaces namespaces) so that a connection's requests reuse
// them instead of allocating per request.
func (m *Metadata) Reset() {
	if len(m.ns) > maxKeptNamespaces {
		clear(m.ns)
		return
	}
	for _, kv := range m.ns {
		clear(kv)
	}
}
