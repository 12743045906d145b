package httpfilter

// Metadata is one request's dynamic metadata: what an earlier filter
// learned about the request (the verified claims of a JWT) for a later one
// (RBAC) to match on. As in Envoy, values are grouped by a namespace, the
// name of the filter that wrote them ("istio_authn",
// "envoy.filters.http.jwt_authn"), then by key. The zero value is empty and
// ready to use; a nil *Metadata reads as empty, so a filter that only reads
// need not check for it. It is not safe for concurrent use: a request's
// filters run one after the other.
//
// A request carries a handful of entries (the metadata exchange's two,
// a JWT's few), so they are a slice searched in order: cheaper than
// hashing two keys, and emptied for the next request without a map's
// clear.
type Metadata struct {
	kv []metadataEntry
}

type metadataEntry struct {
	namespace, key string
	value          any
}

// Set records value under namespace and key, replacing an earlier value.
func (m *Metadata) Set(namespace, key string, value any) {
	for i := range m.kv {
		if e := &m.kv[i]; e.key == key && e.namespace == namespace {
			e.value = value
			return
		}
	}
	m.kv = append(m.kv, metadataEntry{namespace, key, value})
}

// Get returns the value under namespace and key, and whether it is set.
func (m *Metadata) Get(namespace, key string) (any, bool) {
	if m == nil {
		return nil, false
	}
	for i := range m.kv {
		if e := &m.kv[i]; e.key == key && e.namespace == namespace {
			return e.value, true
		}
	}
	return nil, false
}

// maxKeptEntries bounds the entries' storage Reset keeps for reuse.
const maxKeptEntries = 32

// Reset empties m for the next request, keeping its storage (up to
// maxKeptEntries entries) so that a connection's requests reuse it
// instead of allocating per request.
func (m *Metadata) Reset() {
	if cap(m.kv) > maxKeptEntries {
		m.kv = nil
		return
	}
	clear(m.kv) // drop the references to the request's values
	m.kv = m.kv[:0]
}
