package inject

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// DefaultConfigDir is where the injector looks for its `config` and
// `values` files (a mounted istio-sidecar-injector ConfigMap).
const DefaultConfigDir = "/var/lib/istio/inject"

// Files of the injector's config directory.
const (
	ConfigFileName = "config"
	ValuesFileName = "values"
)

// HasConfigFiles says whether dir holds an injector config or values file;
// when it does not, straitd falls back to the istio-sidecar-injector
// ConfigMap (SettingsFromConfigMap).
func HasConfigFiles(dir string) bool {
	for _, f := range []string{ConfigFileName, ValuesFileName} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// LoadDir reads dir/config and dir/values; a missing file is the shipped
// default.
func LoadDir(dir string, mesh *meshv1alpha1.MeshConfig) (*Settings, error) {
	cfg, values := DefaultConfig(), Values(nil)
	if b, err := ReadSettingsFile(filepath.Join(dir, ConfigFileName)); err == nil {
		if cfg, err = ParseConfig(b); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFileName), err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if b, err := ReadSettingsFile(filepath.Join(dir, ValuesFileName)); err == nil {
		if values, err = ParseValues(b); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ValuesFileName), err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return NewSettings(cfg, values, mesh)
}

// WatchDir keeps inj's settings in step with dir until ctx ends: every
// change in dir (including a ConfigMap volume's ..data symlink swap)
// reloads both files after a short quiet period. A file that does not
// load is logged and the previous settings stay. The first load happens
// before WatchDir returns an error for it, so a broken start is visible.
func WatchDir(ctx context.Context, dir string, inj *Injector, mesh *meshv1alpha1.MeshConfig, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "inject-config", "dir", dir)
	// Watch first, then load: a change made between the two is then seen
	// (and reloaded) rather than lost until the next one.
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	s, err := LoadDir(dir, mesh)
	if err != nil {
		return err
	}
	inj.Update(s)
	const quiet = 100 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			timer.Reset(quiet)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("watch error", "error", err)
		case <-timer.C:
			s, err := LoadDir(dir, mesh)
			if err != nil {
				log.Error("injector config not applied; keeping the previous one", "error", err)
				continue
			}
			inj.Update(s)
			log.Info("injector config reloaded")
		}
	}
}
