package meshconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/protobuf/proto"
)

// settleWindow is how long the file must stay quiet after an event before
// it is read: an editor or a ConfigMap volume writes in several steps.
const settleWindow = 100 * time.Millisecond

// Watch reloads the mesh config file at path when it changes, until ctx
// ends, and calls onChange with each config that differs from the one
// applied (at first, applied: what Load returned). A file that does not
// load (unreadable, a field Strait refuses) is logged at WARN, naming the
// field, and the previous config stays. It watches the file's directory,
// so a file replaced by a rename, or a ConfigMap volume swapping its
// ..data link, is seen.
func Watch(ctx context.Context, path string, applied *Config, onChange func(*Config), logger *slog.Logger) error {
	log := logger.With("component", "mesh-config", "file", path)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch mesh config %s: %w", path, err)
	}
	defer w.Close()
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch mesh config %s: %w", path, err)
	}
	// Read once now: the file may have changed between Load and the
	// watch being set up.
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("watch mesh config: watcher closed")
			}
			if name := filepath.Base(ev.Name); name == base || strings.HasPrefix(name, "..") {
				timer.Reset(settleWindow)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("watch mesh config: watcher closed")
			}
			log.Warn("watch error; reloading", "error", err)
			timer.Reset(settleWindow)
		case <-timer.C:
			m, err := Load(path)
			if err != nil {
				log.Warn("mesh config not applied; keeping the previous one", "error", err)
				continue
			}
			if applied != nil && proto.Equal(applied.Mesh, m.Mesh) {
				continue
			}
			applied = m
			onChange(m)
			log.Info("mesh config applied", "settings", m.String())
		}
	}
}
