package model

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
	if len(r.ConfigsUpdated)+len(other.ConfigsUpdated) > 0 {
		m.ConfigsUpdated = make(map[ConfigKey]struct{}, len(r.ConfigsUpdated)+len(other.ConfigsUpdated))
		maps.Copy(m.ConfigsUpdated, r.ConfigsUpdated)
		maps.Copy(m.ConfigsUpdated, other.ConfigsUpdated)
	}
	return m
}
