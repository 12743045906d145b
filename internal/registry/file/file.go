// Package file is the registry that reads Istio networking configs from a
// directory of YAML files and watches it for changes.
package file

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// Timing of Run. Debouncing proper happens in the xDS server; these only
// make sure that a file is read once its writer is done with it.
const (
	// settleWindow is how long the directory must see no event before Run
	// reads the files a burst of events named: an editor's
	// write-rename-chmod sequence, or a writer that truncates a file and
	// then writes it (os.WriteFile), becomes one reload of the finished
	// file.
	settleWindow = 15 * time.Millisecond
	// maxSettle caps the wait for a quiet moment, for a file written
	// without pause.
	maxSettle = time.Second
	// emptyGrace is how long a file that had configs must stay empty before
	// the registry believes it: a truncated file about to be rewritten is
	// empty for a moment, and serving that moment would withdraw every
	// service of the file from every proxy.
	emptyGrace = time.Second
	// defaultCredentialPoll is Options.CredentialPoll's default.
	defaultCredentialPoll = 2 * time.Second
)

// Options configure a Registry.
type Options struct {
	// Dir is the directory whose *.yaml and *.yml files are read
	// (not recursively).
	Dir string
	// Domain is the cluster DNS domain; default "cluster.local".
	Domain string
	// RootNamespace is the namespace whose selector-less Sidecar is the
	// mesh default; default mesh.DefaultRootNamespace.
	RootNamespace string
	// Mesh is the mesh config; nil is Istio's defaults.
	Mesh *meshconfig.Config
	// CredentialsDir holds the Gateway credentials by namespace and name
	// (credentials.go); straitd leaves out the servers whose credential it
	// lacks or cannot parse, and rechecks them every CredentialPoll. ""
	// checks none.
	CredentialsDir string
	// CredentialPoll is how often the credentials are checked again
	// (default 2 s).
	CredentialPoll time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Registry serves the configs of one directory.
//
// Snapshot and ResolveProxy may be called from any goroutine. The per-file
// state is owned by whoever is loading: New, then the Run goroutine.
type Registry struct {
	// Set at creation, read-only.
	dir           string
	domain        string
	rootNamespace string
	credentials   mesh.Credentials // nil: not checked
	credPoll      time.Duration
	log           *slog.Logger

	snap    atomic.Pointer[mesh.Snapshot]
	running atomic.Bool
	// meshCh hands a new mesh config to the Run goroutine (SetMesh).
	meshCh chan *meshconfig.Config

	// Owned by New and then by the Run goroutine.
	files   map[string]*fileState // by path
	version uint64
	mesh    *meshconfig.Config
}

// fileState is what the registry remembers about one file.
type fileState struct {
	data []byte                // the bytes last read, to skip unchanged files
	good []*istioconfig.Config // the last content that parsed without errors
	// emptySince is when the file was first read empty while good still
	// holds configs; zero otherwise. Until emptyGrace has passed, good is
	// served.
	emptySince time.Time
}

// New reads every YAML file in opts.Dir once. Invalid documents are logged
// and skipped; an unreadable directory is an error.
func New(opts Options) (*Registry, error) {
	if opts.Dir == "" {
		return nil, errors.New("file registry: config directory not set")
	}
	fi, err := os.Stat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("file registry: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("file registry: %s is not a directory", opts.Dir)
	}
	if opts.Domain == "" {
		opts.Domain = mesh.DefaultDomain
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registry{
		dir:           opts.Dir,
		domain:        opts.Domain,
		rootNamespace: opts.RootNamespace,
		mesh:          opts.Mesh,
		meshCh:        make(chan *meshconfig.Config, 1),
		log:           opts.Logger.With("component", "mesh.file", "dir", opts.Dir),
		files:         map[string]*fileState{},
		credPoll:      cmp.Or(opts.CredentialPoll, defaultCredentialPoll),
	}
	if opts.CredentialsDir != "" {
		r.credentials = credentialDir(opts.CredentialsDir)
	}
	if _, err := r.reloadPaths(time.Now(), nil); err != nil {
		return nil, err
	}
	if r.snap.Load() == nil {
		r.publish(istioconfig.NewStore())
	}
	return r, nil
}

// Snapshot returns the current snapshot. It is never nil and never
// modified; a change publishes a new one.
func (r *Registry) Snapshot() *mesh.Snapshot { return r.snap.Load() }

// ResolveProxy checks that a proxy belongs to a known workload: in file
// mode that is the WorkloadEntry whose address is the proxy's IP.
func (r *Registry) ResolveProxy(p *proxypush.Proxy) error {
	if p == nil {
		return errors.New("no proxy")
	}
	if r.Snapshot().WorkloadByIP(p.IP) == nil {
		return fmt.Errorf("no WorkloadEntry with address %s in %s (the IP in node id %q)", p.IP, r.dir, p.ID)
	}
	return nil
}

// SetMesh replaces the mesh config: the Run goroutine rebuilds the
// snapshot with it and asks for a full push of every proxy. Safe to call
// from any goroutine; a config not yet taken is replaced by the newer one.
func (r *Registry) SetMesh(m *meshconfig.Config) {
	for {
		select {
		case r.meshCh <- m:
			return
		default:
		}
		select {
		case <-r.meshCh: // drop the older one not yet applied
		default:
		}
	}
}

// Run watches the directory until ctx is done and returns nil then; it
// returns an error if the watch cannot be set up. After every reload that
// changed a config it publishes a new snapshot and then calls onChange (on
// the Run goroutine) with a push request naming the changed configs and
// what they concern (mesh.PushRequestFor): endpoints-only when only
// endpoints changed.
// Run must be called at most once.
func (r *Registry) Run(ctx context.Context, onChange func(*proxypush.PushRequest)) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("file registry: Run called twice")
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file registry: watch %s: %w", r.dir, err)
	}
	defer w.Close()
	if err := w.Add(r.dir); err != nil {
		return fmt.Errorf("file registry: watch %s: %w", r.dir, err)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// emptyTimer fires when a file read empty has stayed so for
	// emptyGrace, to read it again.
	emptyTimer := time.NewTimer(time.Hour)
	emptyTimer.Stop()
	defer emptyTimer.Stop()
	apply := func(start time.Time, paths map[string]bool) {
		r.apply(start, paths, onChange)
		if at, ok := r.nextEmptyCheck(); ok {
			emptyTimer.Reset(time.Until(at))
		}
	}
	var credTick <-chan time.Time // nil: credentials not checked
	if r.credentials != nil {
		t := time.NewTicker(r.credPoll)
		defer t.Stop()
		credTick = t.C
	}
	// Catch changes made between New and the watch being set up.
	apply(time.Now(), nil)

	var (
		pending bool
		first   time.Time
		// paths are the files the events of the burst named; nil after
		// an event that calls for a rescan of the whole directory.
		paths     map[string]bool
		rescanAll bool
	)
	start := func() {
		now := time.Now()
		if !pending {
			pending, first = true, now
			paths, rescanAll = map[string]bool{}, false
		}
		timer.Reset(min(settleWindow, first.Add(maxSettle).Sub(now)))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file registry: watcher closed")
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			switch base := filepath.Base(ev.Name); {
			case isConfigName(base):
				start()
				paths[ev.Name] = true
			case strings.HasPrefix(base, ".."):
				// A ConfigMap volume swapping its ..data symlink changes
				// what every listed file points to: rescan them all.
				start()
				rescanAll = true
			default:
				// Other files (an editor's or an atomic writer's hidden
				// temporary file, notes.txt) are not read; a rename onto
				// a config file names that file.
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file registry: watcher closed")
			}
			// An overflow means events were lost: rescan everything.
			r.log.Warn("watch error; rescanning", "error", err)
			start()
			rescanAll = true
		case <-timer.C:
			pending = false
			if rescanAll {
				paths = nil
			}
			apply(first, paths)
		case <-emptyTimer.C:
			apply(time.Now(), r.emptyPaths())
		case <-credTick:
			// A credential that appeared, was fixed or broke changes
			// which gateway servers are served.
			if r.snap.Load().CredentialsChanged() {
				r.publish(r.snap.Load().Configs)
				if onChange != nil {
					onChange(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.GlobalUpdate}, Start: time.Now()})
				}
			}
		case m := <-r.meshCh:
			// Every proxy's config may depend on the mesh istioconfig.
			r.mesh = m
			r.publish(r.snap.Load().Configs)
			if onChange != nil {
				onChange(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.GlobalUpdate}, Start: time.Now()})
			}
		}
	}
}

// apply rereads the files named in paths (every file when paths is nil)
// and, if a config changed, notifies onChange.
func (r *Registry) apply(start time.Time, paths map[string]bool, onChange func(*proxypush.PushRequest)) {
	old := r.snap.Load()
	changed, err := r.reloadPaths(time.Now(), paths)
	if err != nil {
		r.log.Error("rescan failed; keeping the current configs", "error", err)
		return
	}
	if len(changed) == 0 || onChange == nil {
		return
	}
	onChange(mesh.PushRequestFor(old, r.snap.Load(), changed, start))
}

// nextEmptyCheck returns when the earliest file read empty has been empty
// for emptyGrace; ok is false when no file waits.
func (r *Registry) nextEmptyCheck() (at time.Time, ok bool) {
	for _, st := range r.files {
		if !st.emptySince.IsZero() && (!ok || st.emptySince.Before(at)) {
			at, ok = st.emptySince, true
		}
	}
	return at.Add(emptyGrace), ok
}

// emptyPaths returns the files read empty whose emptiness is not applied
// yet.
func (r *Registry) emptyPaths() map[string]bool {
	out := map[string]bool{}
	for path, st := range r.files {
		if !st.emptySince.IsZero() {
			out[path] = true
		}
	}
	return out
}

// reloadPaths rereads the files whose bytes changed among those in only
// (every file of the directory when only is nil; a named file that is gone
// or no longer a regular file is dropped), rebuilds the store from the last
// good content of every file, and publishes a new snapshot when a config
// changed. It returns the changed keys. now is the time of the read.
//
// A file keeps its last good content while it does not parse, and while
// it is empty after having had configs, until it has been empty for
// emptyGrace (a writer that truncates before writing must not withdraw the
// file's services for a moment).
func (r *Registry) reloadPaths(now time.Time, only map[string]bool) (map[proxypush.ConfigKey]struct{}, error) {
	var paths []string
	present := map[string]bool{}
	if only == nil {
		var err error
		if paths, err = r.list(); err != nil {
			return nil, err
		}
	} else {
		for path := range r.files {
			if !only[path] {
				present[path] = true // not named by an event: unchanged
			}
		}
		for path := range only {
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
				paths = append(paths, path)
			}
		}
		slices.Sort(paths)
	}
	for _, path := range paths {
		data, err := istioconfig.ReadFile(path) // at most istioconfig.MaxFileBytes
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since listed; treated as deleted
		}
		present[path] = true
		st := r.files[path]
		if err != nil {
			r.log.Error("cannot read config file; keeping its last good content", "file", path, "error", err)
			if st == nil {
				r.files[path] = &fileState{}
			}
			continue
		}
		if st != nil && st.data != nil && bytes.Equal(st.data, data) && st.emptySince.IsZero() {
			continue
		}
		if len(bytes.TrimSpace(data)) == 0 && st != nil && len(st.good) > 0 {
			if st.emptySince.IsZero() {
				st.emptySince = now
			}
			if now.Sub(st.emptySince) < emptyGrace {
				r.log.Info("config file is empty; keeping its configs unless it stays empty", "file", path, "for", emptyGrace)
				continue
			}
			r.log.Info("config file stayed empty; removing its configs", "file", path)
		} else if st != nil {
			st.emptySince = time.Time{}
		}
		res := istioconfig.ParseFile(path, data)
		for _, w := range res.Warnings {
			r.log.Warn("skipping document", "warning", w)
		}
		switch {
		case res.Err == nil:
			r.files[path] = &fileState{data: data, good: res.Configs}
		case st != nil:
			for _, fe := range istioconfig.FieldErrors(res.Err) {
				r.log.Error("invalid config", "error", fe.Error())
			}
			r.log.Error("keeping the last good content of the file; fix it to apply changes", "file", path)
			st.data = data
		default:
			// Nothing good yet: serve the valid documents.
			for _, fe := range istioconfig.FieldErrors(res.Err) {
				r.log.Error("invalid config; document skipped", "error", fe.Error())
			}
			r.files[path] = &fileState{data: data, good: res.Configs}
		}
	}
	for path := range r.files {
		if !present[path] {
			r.log.Info("config file removed", "file", path)
			delete(r.files, path)
		}
	}

	store := istioconfig.NewStore()
	for _, path := range slices.Sorted(maps.Keys(r.files)) {
		for _, c := range r.files[path].good {
			if err := store.Add(c); err != nil {
				r.log.Error("invalid config; document skipped", "error", err.Error())
			}
		}
	}
	var old *istioconfig.Store
	if s := r.snap.Load(); s != nil {
		old = s.Configs
	}
	changed := istioconfig.Diff(old, store)
	if len(changed) == 0 && r.snap.Load() != nil {
		return changed, nil
	}
	// Only endpoints of ServiceEntries changed (the common case): derive
	// the snapshot from the current one instead of rebuilding it.
	if cur := r.snap.Load(); cur != nil {
		if snap, ok := cur.UpdateEndpoints(store, changed, r.version+1); ok {
			r.version++
			r.snap.Store(snap)
			r.log.Info("endpoints applied", "version", snap.Version, "configs", len(changed))
			return changed, nil
		}
	}
	r.publish(store)
	return changed, nil
}

func (r *Registry) publish(store *istioconfig.Store) {
	r.version++
	snap, problems := mesh.Build(store, mesh.BuildOptions{Domain: r.domain, RootNamespace: r.rootNamespace, Mesh: r.mesh, Version: r.version, Previous: r.snap.Load(),
		Credentials: r.credentials})
	for _, p := range problems {
		r.log.Warn("config conflict", "error", p.Error())
	}
	r.snap.Store(snap)
	r.log.Info("configs applied", "version", snap.Version, "configs", store.Len(), "services", len(snap.Services))
}

// isConfigName reports whether a file name is one the registry reads: a
// *.yaml or *.yml file that is not hidden.
func isConfigName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	ext := filepath.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}

// list returns the YAML files in the directory, following symlinks
// (Kubernetes mounts ConfigMaps as symlinks) and skipping hidden files.
func (r *Registry) list() ([]string, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !isConfigName(name) {
			continue
		}
		path := filepath.Join(r.dir, name)
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, path)
	}
	return out, nil
}
