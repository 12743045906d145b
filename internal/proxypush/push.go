package proxypush

import (
	"maps"
	"time"
)

// Kind names a config kind, e.g. "ServiceEntry".
type Kind string

// ConfigKey identifies one config object.
type ConfigKey struct {
	Kind      Kind
	Name      string
	Namespace string
}

func (k ConfigKey) String() string { return string(k.Kind) + "/" + k.Namespace + "/" + k.Name }

// TriggerReason says why a push happened.
type TriggerReason string

// The trigger reasons, Istio's (pilot/pkg/model/push_context.go
// TriggerReason).
const (
	EndpointUpdate TriggerReason = "endpoint"
	ConfigUpdate   TriggerReason = "config"
	ServiceUpdate  TriggerReason = "service"
	ProxyUpdate    TriggerReason = "proxy"
	GlobalUpdate   TriggerReason = "global"
)

// PushRequest describes a change to push. Requests are merged by debounce
// and by the push queue; a merged request keeps every reason and key.
type PushRequest struct {
	// Full is true when clusters, listeners and routes may have changed;
	// false means only endpoints changed (an EDS push).
	Full bool
	// ConfigsUpdated lists the changed configs; empty with Full means "everything".
	ConfigsUpdated map[ConfigKey]struct{}
	// ServicesUpdated names the hostnames whose service or endpoints
	// changed. Together with ConfigsUpdated it lets the server push only to
	// the proxies that depend on a change; when both are empty the request
	// concerns every proxy.
	ServicesUpdated map[string]struct{}
	// AddressesUpdated lists workload IPs whose inbound side (the services
	// they serve) changed: the proxies at these IPs get a full push even
	// when the request is endpoints-only.
	AddressesUpdated map[string]struct{}
	// Reason lists why, one entry per merged event.
	Reason []TriggerReason
	// Start is when the first merged event happened (for convergence metrics).
	Start time.Time
}

// Merge returns a new request that covers both r and other. Either may be nil.
func (r *PushRequest) Merge(other *PushRequest) *PushRequest {
	if r == nil {
		return other
	}
	if other == nil {
		return r
	}
	m := &PushRequest{
		Full:   r.Full || other.Full,
		Reason: append(append([]TriggerReason(nil), r.Reason...), other.Reason...),
		Start:  r.Start,
	}
	if !other.Start.IsZero() && (m.Start.IsZero() || other.Start.Before(m.Start)) {
		m.Start = other.Start
	}
	m.ConfigsUpdated = union(r.ConfigsUpdated, other.ConfigsUpdated)
	m.ServicesUpdated = union(r.ServicesUpdated, other.ServicesUpdated)
	m.AddressesUpdated = union(r.AddressesUpdated, other.AddressesUpdated)
	return m
}

// IsGlobal reports whether the request names nothing it concerns, so it
// concerns every proxy.
func (r *PushRequest) IsGlobal() bool {
	return len(r.ConfigsUpdated) == 0 && len(r.ServicesUpdated) == 0 && len(r.AddressesUpdated) == 0
}

// Batch merges many requests into one. Merge copies both requests' sets
// on every call, so merging n requests one by one costs O(n²); a Batch owns
// its sets and adds each request in time linear in that request's size. The
// zero value is an empty batch.
type Batch struct {
	req *PushRequest
}

// Add merges r into the batch; r is not modified nor retained.
func (b *Batch) Add(r *PushRequest) {
	if r == nil {
		return
	}
	if b.req == nil {
		b.req = &PushRequest{Start: r.Start}
	}
	m := b.req
	m.Full = m.Full || r.Full
	m.Reason = append(m.Reason, r.Reason...)
	if !r.Start.IsZero() && (m.Start.IsZero() || r.Start.Before(m.Start)) {
		m.Start = r.Start
	}
	m.ConfigsUpdated = addAll(m.ConfigsUpdated, r.ConfigsUpdated)
	m.ServicesUpdated = addAll(m.ServicesUpdated, r.ServicesUpdated)
	m.AddressesUpdated = addAll(m.AddressesUpdated, r.AddressesUpdated)
}

// Request returns the merged request, or nil when nothing was added. The
// batch must not be used afterwards.
func (b *Batch) Request() *PushRequest { return b.req }

// addAll adds src to dst, allocating dst when needed; it returns dst.
func addAll[K comparable](dst, src map[K]struct{}) map[K]struct{} {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[K]struct{}, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

// union returns a new set holding both, or nil when both are empty.
func union[K comparable](a, b map[K]struct{}) map[K]struct{} {
	if len(a)+len(b) == 0 {
		return nil
	}
	m := make(map[K]struct{}, len(a)+len(b))
	maps.Copy(m, a)
	maps.Copy(m, b)
	return m
}
