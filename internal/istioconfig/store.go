package istioconfig

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/straitmesh/strait/internal/proxypush"
)

// Store holds configs per kind, keyed by proxypush.ConfigKey.
//
// A Store is filled with Add by one goroutine and is read-only once it is
// shared (the file registry publishes each Store inside an immutable
// snapshot). Reads of a shared Store need no locking.
type Store struct {
	byKind map[proxypush.Kind]map[proxypush.ConfigKey]*Config
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{byKind: map[proxypush.Kind]map[proxypush.ConfigKey]*Config{}}
}

// Add inserts c. A config with the same kind, namespace and name is an
// error naming both sources; the store keeps the first.
func (s *Store) Add(c *Config) error {
	m := s.byKind[c.Kind]
	if m == nil {
		m = map[proxypush.ConfigKey]*Config{}
		s.byKind[c.Kind] = m
	}
	if prev, ok := m[c.Key()]; ok {
		return &FieldError{File: c.Source.File, Document: c.Source.Document, Field: "metadata.name",
			Problem: fmt.Sprintf("duplicate %s %s/%s (also in %s)", c.Kind, c.Namespace, c.Name, prev.Source)}
	}
	m[c.Key()] = c
	return nil
}

// Get returns the config with key k, or nil.
func (s *Store) Get(k proxypush.ConfigKey) *Config {
	if s == nil {
		return nil
	}
	return s.byKind[k.Kind][k]
}

// List returns the configs of one kind sorted by namespace, then name.
func (s *Store) List(kind proxypush.Kind) []*Config {
	if s == nil {
		return nil
	}
	m := s.byKind[kind]
	out := make([]*Config, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Config) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Len returns the number of configs of every kind.
func (s *Store) Len() int {
	if s == nil {
		return 0
	}
	n := 0
	for _, m := range s.byKind {
		n += len(m)
	}
	return n
}

// Diff returns the keys of configs added, removed or changed between old
// and new (either may be nil).
func Diff(old, new *Store) map[proxypush.ConfigKey]struct{} {
	changed := map[proxypush.ConfigKey]struct{}{}
	if old != nil {
		for _, m := range old.byKind {
			for k, c := range m {
				if !c.Equal(new.Get(k)) {
					changed[k] = struct{}{}
				}
			}
		}
	}
	if new != nil {
		for _, m := range new.byKind {
			for k := range m {
				if old.Get(k) == nil {
					changed[k] = struct{}{}
				}
			}
		}
	}
	return changed
}

// With returns a store that holds s's configs with those of repl put in
// their place: a config replaces the one with its key, a nil value removes
// the key. s is not modified, and the new store shares with s the configs
// and the per-kind tables that repl does not touch, so a change to a few
// configs costs a copy of their kinds' tables, not of the whole store.
func (s *Store) With(repl map[proxypush.ConfigKey]*Config) *Store {
	out := &Store{byKind: make(map[proxypush.Kind]map[proxypush.ConfigKey]*Config, len(s.byKind)+1)}
	for kind, m := range s.byKind {
		out.byKind[kind] = m
	}
	copied := map[proxypush.Kind]bool{}
	for k, c := range repl {
		if !copied[k.Kind] {
			copied[k.Kind] = true
			m := make(map[proxypush.ConfigKey]*Config, len(s.byKind[k.Kind])+1)
			for kk, cc := range s.byKind[k.Kind] {
				m[kk] = cc
			}
			out.byKind[k.Kind] = m
		}
		if c == nil {
			delete(out.byKind[k.Kind], k)
		} else {
			out.byKind[k.Kind][k] = c
		}
	}
	return out
}
