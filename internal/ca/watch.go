package ca

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloadDelay lets a writer finish a set of files (a root rotation step
// rewrites up to four) before the CA reads them.
const reloadDelay = 200 * time.Millisecond

// Watch reloads the CA whenever a file in its directory changes, until ctx
// is done. A reload that fails is logged and the CA keeps what it had; the
// next change is tried again. Writes of Kubernetes Secret volumes (a
// symlink swap of ..data) are changes in the directory too.
func (c *CA) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("ca: watch: %w", err)
	}
	defer w.Close()
	if err := w.Add(c.dir()); err != nil {
		return fmt.Errorf("ca: watch %s: %w", c.dir(), err)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// The CA was read before this watch existed, and a change made in
	// between made no event: reload now if the files differ from it.
	if c.filesChanged() {
		timer.Reset(0)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
				timer.Reset(reloadDelay)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			c.log.Warn("watching the CA directory", "error", err)
		case <-timer.C:
			if err := c.Reload(); err != nil {
				c.log.Error("CA files changed but do not load; still signing with the previous CA", "error", err)
			}
		}
	}
}

// filesChanged reports whether the CA directory now holds another signing
// certificate, chain or trust bundle than the one in use. Files that do not
// load are left to the watch: their writer's next step makes an event.
func (c *CA) filesChanged() bool {
	kc, err := c.load()
	if err != nil {
		return false
	}
	cur := c.current()
	return !kc.cert.Equal(cur.cert) || !bytes.Equal(kc.chainPEM, cur.chainPEM) || !bytes.Equal(kc.rootsPEM, cur.rootsPEM)
}
