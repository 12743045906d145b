package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"testing"
	"testing/synctest"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// applyTimeout bounds the wait for a written config to show in a proxy or
// in the answers: generous, since CI runs on a loaded machine and a wait
// ends as soon as its condition holds.
const applyTimeout = 30 * time.Second

// pollInterval is the pause between two checks of a wait.
const pollInterval = 50 * time.Millisecond

// errGiveUp, wrapped in a check's error, ends a wait at once: what the
// check saw cannot get better by waiting.
var errGiveUp = errors.New("no use waiting")

// poll calls check until it returns nil (or an error wrapping errGiveUp). Once timeout has passed or ctx
// has ended it returns check's last error, which says what was seen
// (the last answer), wrapped with how long it waited.
func poll(ctx context.Context, timeout time.Duration, check func() error) error {
	return pollEvery(ctx, timeout, pollInterval, check)
}

// pollEvery is poll with another pause between checks, for checks that
// cost more than a request (an exec in a Kubernetes pod, a list of the
// API server's objects).
func pollEvery(ctx context.Context, timeout, interval time.Duration, check func() error) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		if errors.Is(err, errGiveUp) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", time.Since(start).Round(time.Millisecond), err)
		case <-tick.C:
		}
	}
}

// waitFor is poll that fails the test: "WHAT: after T: LAST ERROR".
func waitFor(ctx context.Context, t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := poll(ctx, timeout, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitEvery is waitFor with pollEvery's interval.
func waitEvery(ctx context.Context, t testing.TB, timeout, interval time.Duration, what string, check func() error) {
	t.Helper()
	if err := pollEvery(ctx, timeout, interval, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitDump waits until the pod's proxy's /config_dump matches every
// regular expression of want (quote literal text with quote).
func waitDump(ctx context.Context, t testing.TB, pod *localmesh.Pod, want ...string) {
	t.Helper()
	res := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		res[i] = regexp.MustCompile(w)
	}
	waitFor(ctx, t, applyTimeout, "config never reached "+pod.Name+"'s proxy", func() error {
		dump, err := pod.Admin(ctx, "/config_dump?include_eds") // endpoints too
		if err != nil {
			return err
		}
		var missing []string
		for i, re := range res {
			if !re.Match(dump) {
				missing = append(missing, want[i])
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("config dump lacks %q", missing)
		}
		return nil
	})
}

// waitDumpLacks waits until the pod's proxy's /config_dump matches none
// of the regular expressions of gone: a config that took something away.
func waitDumpLacks(ctx context.Context, t testing.TB, pod *localmesh.Pod, gone ...string) {
	t.Helper()
	res := make([]*regexp.Regexp, len(gone))
	for i, g := range gone {
		res[i] = regexp.MustCompile(g)
	}
	waitFor(ctx, t, applyTimeout, "config never left "+pod.Name+"'s proxy", func() error {
		dump, err := pod.Admin(ctx, "/config_dump?include_eds") // endpoints too
		if err != nil {
			return err
		}
		for i, re := range res {
			if re.Match(dump) {
				return fmt.Errorf("config dump still has %q", gone[i])
			}
		}
		return nil
	})
}

// quote turns literal texts into the regular expressions that match them,
// for waitDump.
func quote(texts ...string) []string {
	out := make([]string, len(texts))
	for i, s := range texts {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}

// writeConfig writes a file into the mesh's config directory. The caller
// then waits for what the change makes observable (waitDump, waitFor):
// straitd applies a file some time after it is written.
func writeConfig(t testing.TB, m *localmesh.Mesh, name string, data []byte) {
	t.Helper()
	if err := m.WriteConfig(name, data); err != nil {
		t.Fatalf("write config %s: %v", name, err)
	}
}

// fromPod is nil when r is a 200 from strait-echo in the named pod, else an
// error that describes r.
func fromPod(r reply, pod string) error {
	if r.err == nil && r.status == 200 && r.pod == pod {
		return nil
	}
	return fmt.Errorf("last answer %s; want 200 from pod %s", r, pod)
}

// fromVersion is fromPod for strait-echo's --version.
func fromVersion(r reply, version string) error {
	if r.err == nil && r.status == 200 && r.version == version {
		return nil
	}
	return fmt.Errorf("last answer %s; want 200 from version %s", r, version)
}

// waitPod waits until a GET of url (with an optional Host) from p, on a
// new connection each time, answers 200 from strait-echo in the named
// pod; what names the wait in the failure, with the last answer.
func waitPod(ctx context.Context, t testing.TB, p *localmesh.Pod, url, host, pod string, timeout time.Duration, what string) {
	t.Helper()
	waitFor(ctx, t, timeout, what, func() error { return fromPod(podGet(ctx, p, url, host), pod) })
}

// waitLoad waits until the load has made n more requests than it had
// made when called: it ran on what the test changed last.
func waitLoad(ctx context.Context, t testing.TB, load *localmesh.Load, n int, what string) {
	t.Helper()
	from := load.Seen().Total
	waitFor(ctx, t, applyTimeout, what, func() error {
		if got := load.Seen().Total - from; got < n {
			return fmt.Errorf("%d more requests, want %d", got, n)
		}
		return nil
	})
}

// TestPoll checks the wait every e2e test relies on, in virtual time: it
// returns as soon as the check holds, and otherwise reports the check's
// last error once the timeout or the caller's context ends it.
func TestPoll(t *testing.T) {
	t.Run("returns once the check holds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			start := time.Now()
			err := poll(t.Context(), time.Minute, func() error {
				if calls++; calls < 3 {
					return fmt.Errorf("attempt %d", calls)
				}
				return nil
			})
			if err != nil || calls != 3 {
				t.Fatalf("poll = %v after %d calls, want nil after 3", err, calls)
			}
			if took := time.Since(start); took != 2*pollInterval {
				t.Errorf("took %v, want two intervals (%v)", took, 2*pollInterval)
			}
		})
	})
	t.Run("reports the last answer at the timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			start := time.Now()
			err := poll(t.Context(), time.Second, func() error {
				calls++
				return fmt.Errorf("attempt %d", calls)
			})
			if err == nil || err.Error() != fmt.Sprintf("after 1s: attempt %d", calls) {
				t.Fatalf("poll = %v, want the last of %d attempts after 1s", err, calls)
			}
			if took := time.Since(start); took != time.Second || calls < 2 {
				t.Errorf("gave up after %v and %d calls, want 1s and more than one", took, calls)
			}
		})
	})
	t.Run("ends with the caller's context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			err := poll(ctx, time.Hour, func() error { return errors.New("never") })
			if err == nil || err.Error() != "after 1s: never" || time.Since(start) != time.Second {
				t.Fatalf("poll = %v after %v, want the last error once the context ended (1s)", err, time.Since(start))
			}
		})
	})
}

// waitOK waits until a GET of url with c answers 200: a path that a
// change (or the start) opens.
func waitOK(ctx context.Context, t testing.TB, c *http.Client, url string) {
	t.Helper()
	waitFor(ctx, t, applyTimeout, "GET "+url, func() error {
		r := send(ctx, c, http.MethodGet, url, "", nil)
		if r.err != nil {
			return r.err
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("status %d: %s", r.status, r.body)
		}
		return nil
	})
}

// replaceFile writes content to path in one rename, so a watcher (straitd's
// mesh config, a zone file) never reads it half written.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}
