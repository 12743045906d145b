package route

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
)

// entry is one stored route configuration: its compiled table and the
// configuration in its deterministic wire form (configWire), which Apply
// compares to tell a configuration sent again unchanged and Snapshot
// decodes for the config dump. Kept as bytes, not as the decoded message:
// the RouteConfiguration of 1,000 virtual hosts is ~0.5 MB on the wire
// and ~2.2 MiB decoded, and the request path reads only the table.
type entry struct {
	config []byte
	table  *Table
}

// configWire is rc's deterministic wire form: equal configurations
// (proto.Equal) have equal bytes.
func configWire(rc *routev3.RouteConfiguration) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rc)
	if err != nil {
		return nil, fmt.Errorf("route_config %q: marshal: %w", rc.GetName(), err)
	}
	return b, nil
}

// Store holds the route configurations received over RDS. Get is lock-free;
// updates are serialized by mu and publish a new immutable map, so an HCM
// picks up a new route table on its next request without disturbing
// requests in flight.
type Store struct {
	tables atomic.Pointer[map[string]*entry]

	mu      sync.Mutex // serializes Apply and guards version
	version string

	parsers PerFilterParsers // set at creation, read-only
}

// NewStore returns an empty store.
func NewStore() *Store { return NewStoreWith(nil) }

// NewStoreWith returns an empty store whose tables compile
// typed_per_filter_config with parsers (CompileWith).
func NewStoreWith(parsers PerFilterParsers) *Store {
	s := &Store{parsers: parsers}
	m := map[string]*entry{}
	s.tables.Store(&m)
	return s
}

// Get returns the compiled table for a route configuration name, or nil.
func (s *Store) Get(name string) *Table {
	if e := (*s.tables.Load())[name]; e != nil {
		return e.table
	}
	return nil
}

// Apply merges route configurations from an RDS response (configurations not
// named in the response are kept). On error nothing changes.
func (s *Store) Apply(version string, rcs []*routev3.RouteConfiguration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := *s.tables.Load()
	next := make(map[string]*entry, len(cur)+len(rcs))
	for k, v := range cur {
		next[k] = v
	}
	for _, rc := range rcs {
		wire, err := configWire(rc)
		if err != nil {
			return err
		}
		if old := cur[rc.GetName()]; old != nil && bytes.Equal(old.config, wire) {
			continue
		}
		t, err := CompileWith(rc, s.parsers)
		if err != nil {
			return err
		}
		next[rc.GetName()] = &entry{config: wire, table: t}
	}
	s.tables.Store(&next)
	s.version = version
	return nil
}

// Has reports whether every named configuration is present.
func (s *Store) Has(names []string) bool {
	m := *s.tables.Load()
	for _, n := range names {
		if m[n] == nil {
			return false
		}
	}
	return true
}

// Snapshot returns the version and the configurations, sorted by name,
// decoded afresh: the caller owns them.
func (s *Store) Snapshot() (string, []*routev3.RouteConfiguration) {
	s.mu.Lock()
	v := s.version
	s.mu.Unlock()
	var out []*routev3.RouteConfiguration
	for name, e := range *s.tables.Load() {
		rc := &routev3.RouteConfiguration{}
		if err := proto.Unmarshal(e.config, rc); err != nil {
			// configWire's own output of a configuration that decoded
			// and compiled: cannot fail.
			panic(fmt.Sprintf("route: kept route_config %q does not decode: %v", name, err))
		}
		out = append(out, rc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return v, out
}

// EachConfig calls f with the name and the deterministic wire form of
// each stored configuration (those Snapshot lists).
func (s *Store) EachConfig(f func(name string, wire []byte)) {
	for name, e := range *s.tables.Load() {
		f(name, e.config)
	}
}

// Validate compiles rc without storing it.
func (s *Store) Validate(rc *routev3.RouteConfiguration) error {
	if _, err := CompileWith(rc, s.parsers); err != nil {
		return fmt.Errorf("route_config %q: %w", rc.GetName(), err)
	}
	return nil
}
