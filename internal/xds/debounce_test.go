package xds

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/model"
)

type firedPush struct {
	req    *model.PushRequest
	events int
	waited time.Duration
	at     time.Time
}

// startDebounce runs debounce until the test ends and returns its input and
// the pushes it fires.
func startDebounce(t *testing.T, opts debounceOptions) (chan<- *model.PushRequest, <-chan firedPush) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan *model.PushRequest)
	out := make(chan firedPush, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		debounce(ctx, in, opts, func(req *model.PushRequest, events int, waited time.Duration) {
			out <- firedPush{req: req, events: events, waited: waited, at: time.Now()}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return in, out
}

func nextPush(t *testing.T, out <-chan firedPush, within time.Duration) firedPush {
	t.Helper()
	select {
	case p := <-out:
		return p
	case <-time.After(within):
		t.Fatalf("no push within %v", within)
		return firedPush{}
	}
}

func noPush(t *testing.T, out <-chan firedPush, during time.Duration) {
	t.Helper()
	select {
	case p := <-out:
		t.Fatalf("unexpected push %+v", p.req)
	case <-time.After(during):
	}
}

func TestDebounceQuietPeriodMergesReasons(t *testing.T) {
	const after = 300 * time.Millisecond
	in, out := startDebounce(t, debounceOptions{after: after, max: 10 * time.Second})
	sent := []model.TriggerReason{model.ConfigUpdate, model.ServiceUpdate, model.EndpointUpdate, model.ConfigUpdate}
	var last time.Time
	for i, r := range sent {
		// Taken before the send: the debouncer sees the event no earlier,
		// so the quiet period measured from here is a lower bound.
		last = time.Now()
		in <- &model.PushRequest{Full: r != model.EndpointUpdate, Reason: []model.TriggerReason{r},
			ConfigsUpdated: map[model.ConfigKey]struct{}{{Kind: "K", Name: string(rune('a' + i))}: {}}}
		time.Sleep(after / 30) // well inside the quiet period: keeps merging
	}
	p := nextPush(t, out, 5*time.Second)
	if quiet := p.at.Sub(last); quiet < after {
		t.Errorf("push fired %v after the last event, want at least the quiet period %v", quiet, after)
	}
	if p.events != len(sent) || !slices.Equal(p.req.Reason, sent) {
		t.Errorf("push merged %d events with reasons %v, want %d with %v", p.events, p.req.Reason, len(sent), sent)
	}
	if !p.req.Full || len(p.req.ConfigsUpdated) != len(sent) {
		t.Errorf("merged request = %+v, want Full with %d configs", p.req, len(sent))
	}
	noPush(t, out, 2*after)
}

func TestDebounceMaxWait(t *testing.T) {
	// The quiet period is far longer than the cap, and events keep coming,
	// so only the cap can fire the push; this holds however late the
	// feeder's ticks are on a loaded machine.
	const (
		after   = 3 * time.Second
		maxWait = 300 * time.Millisecond
	)
	in, out := startDebounce(t, debounceOptions{after: after, max: maxWait})
	first := time.Now()
	stop := make(chan struct{})
	feederDone := make(chan struct{})
	go func() {
		defer close(feederDone)
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				select {
				case in <- &model.PushRequest{Full: true, Reason: []model.TriggerReason{model.ConfigUpdate}}:
				case <-stop:
					return
				}
			}
		}
	}()
	in <- &model.PushRequest{Full: true, Reason: []model.TriggerReason{model.ConfigUpdate}}
	p := nextPush(t, out, 5*time.Second)
	close(stop)
	<-feederDone
	waited := p.at.Sub(first)
	if waited < maxWait {
		t.Errorf("push fired %v after the first event, before the max wait %v", waited, maxWait)
	}
	if waited >= after {
		t.Errorf("push fired %v after the first event: the max wait %v did not cap the quiet period %v", waited, maxWait, after)
	}
	if !p.req.Full || p.events != len(p.req.Reason) {
		t.Errorf("push merged %d events with %d reasons", p.events, len(p.req.Reason))
	}
}

func TestDebounceEDSBypass(t *testing.T) {
	const after = 500 * time.Millisecond
	in, out := startDebounce(t, debounceOptions{after: after, max: 10 * time.Second, skipEDS: true})
	sentAt := time.Now()
	in <- &model.PushRequest{Full: false, Reason: []model.TriggerReason{model.EndpointUpdate}}
	p := nextPush(t, out, 5*time.Second)
	if p.req.Full || p.at.Sub(sentAt) >= after {
		t.Errorf("endpoint-only push fired after %v (full=%v), want immediately", p.at.Sub(sentAt), p.req.Full)
	}
	// Full requests are still debounced.
	sentAt = time.Now()
	in <- &model.PushRequest{Full: true, Reason: []model.TriggerReason{model.ConfigUpdate}}
	p = nextPush(t, out, 5*time.Second)
	if !p.req.Full || p.at.Sub(sentAt) < after {
		t.Errorf("full push fired after %v, want at least %v", p.at.Sub(sentAt), after)
	}
}

func TestDebounceEDSDebouncedByDefault(t *testing.T) {
	const after = 100 * time.Millisecond
	in, out := startDebounce(t, debounceOptions{after: after, max: 10 * time.Second})
	sentAt := time.Now()
	in <- &model.PushRequest{Full: false, Reason: []model.TriggerReason{model.EndpointUpdate}}
	in <- &model.PushRequest{Full: false, Reason: []model.TriggerReason{model.EndpointUpdate}}
	p := nextPush(t, out, 5*time.Second)
	if p.at.Sub(sentAt) < after || p.events != 2 || p.req.Full {
		t.Errorf("push after %v merging %d events (full=%v), want one EDS push after %v merging 2", p.at.Sub(sentAt), p.events, p.req.Full, after)
	}
}

// debounceStep is one step of a debounce scenario: send a request, or wait
// for the next push and check it.
type debounceStep struct {
	send *model.PushRequest
	want *wantPush
}

// wantPush describes an expected push. A leading push is one fired on the
// arrival of a request (waited 0, before the quiet period could end); any
// other is debounced (waited > 0, no sooner than min(after, max) after the
// last request sent).
type wantPush struct {
	events  int
	full    bool
	leading bool
}

func sendEDS() debounceStep {
	return debounceStep{send: &model.PushRequest{Full: false, Reason: []model.TriggerReason{model.EndpointUpdate}}}
}

func sendFull() debounceStep {
	return debounceStep{send: &model.PushRequest{Full: true, Reason: []model.TriggerReason{model.ConfigUpdate}}}
}

func leadingPush() debounceStep { return debounceStep{want: &wantPush{events: 1, leading: true}} }

func debouncedPush(events int, full bool) debounceStep {
	return debounceStep{want: &wantPush{events: events, full: full}}
}

// TestDebounceEDSLeadingEdge runs request sequences through debounce with
// and without edsLeadingEdge. Checks are on order, counts and lower bounds;
// the only upper bound is that a leading push comes before the quiet period
// (1s) could have ended.
func TestDebounceEDSLeadingEdge(t *testing.T) {
	const after = time.Second
	on := debounceOptions{after: after, max: 10 * time.Second, edsLeadingEdge: true}
	off := debounceOptions{after: after, max: 10 * time.Second}
	tests := []struct {
		name  string
		opts  debounceOptions
		steps []debounceStep
	}{
		{
			name:  "off: an endpoints request waits for the quiet period",
			opts:  off,
			steps: []debounceStep{sendEDS(), debouncedPush(1, false)},
		},
		{
			name:  "off: a burst of endpoints requests is one push",
			opts:  off,
			steps: []debounceStep{sendEDS(), sendEDS(), sendEDS(), debouncedPush(3, false)},
		},
		{
			name:  "an isolated endpoints request is pushed at once",
			opts:  on,
			steps: []debounceStep{sendEDS(), leadingPush()},
		},
		{
			name:  "a burst: the first at once, the rest merged into one push",
			opts:  on,
			steps: []debounceStep{sendEDS(), sendEDS(), sendEDS(), sendEDS(), leadingPush(), debouncedPush(3, false)},
		},
		{
			name: "idle again once the merged push is out",
			opts: on,
			steps: []debounceStep{
				sendEDS(), leadingPush(),
				sendEDS(), sendEDS(), debouncedPush(2, false),
				sendEDS(), leadingPush(),
			},
		},
		{
			name:  "a full request is debounced",
			opts:  on,
			steps: []debounceStep{sendFull(), debouncedPush(1, true)},
		},
		{
			name:  "an endpoints request joins a pending full one",
			opts:  on,
			steps: []debounceStep{sendFull(), sendEDS(), debouncedPush(2, true)},
		},
		{
			name:  "a full request after a leading push is debounced",
			opts:  on,
			steps: []debounceStep{sendEDS(), leadingPush(), sendFull(), debouncedPush(1, true)},
		},
		{
			// The max wait fires the full push long before the quiet
			// period ends: the debouncer is not idle yet.
			name:  "an endpoints request within the quiet period of a capped push is debounced",
			opts:  debounceOptions{after: after, max: 100 * time.Millisecond, edsLeadingEdge: true},
			steps: []debounceStep{sendFull(), debouncedPush(1, true), sendEDS(), debouncedPush(1, false)},
		},
		{
			name:  "skipEDS takes precedence: every endpoints request at once",
			opts:  debounceOptions{after: after, max: 10 * time.Second, skipEDS: true, edsLeadingEdge: true},
			steps: []debounceStep{sendEDS(), sendEDS(), leadingPush(), leadingPush()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, out := startDebounce(t, tt.opts)
			var (
				lastSend, groupStart time.Time
				sent, pushed         int
			)
			for i, st := range tt.steps {
				if st.send != nil {
					now := time.Now()
					if groupStart.IsZero() {
						groupStart = now
					} else if d := now.Sub(groupStart); d > tt.opts.after/2 {
						// The scenario assumes back-to-back sends.
						t.Skipf("sending took %v on this machine, too long for a burst", d)
					}
					lastSend = now
					in <- st.send
					sent++
					continue
				}
				groupStart = time.Time{}
				w := st.want
				p := nextPush(t, out, 10*time.Second)
				pushed += p.events
				if p.events != w.events || p.req.Full != w.full || len(p.req.Reason) != p.events {
					t.Fatalf("step %d: push of %d events (full=%v, reasons %v), want %d events (full=%v)",
						i, p.events, p.req.Full, p.req.Reason, w.events, w.full)
				}
				since := p.at.Sub(lastSend)
				if w.leading {
					if p.waited != 0 || since >= tt.opts.after {
						t.Fatalf("step %d: push %v after the last request (waited %v), want at once", i, since, p.waited)
					}
					continue
				}
				if minWait := min(tt.opts.after, tt.opts.max); p.waited <= 0 || since < minWait {
					t.Fatalf("step %d: push %v after the last request (waited %v), want debounced, at least %v", i, since, p.waited, minWait)
				}
			}
			if pushed != sent {
				t.Errorf("pushes carried %d requests, %d were sent", pushed, sent)
			}
			noPush(t, out, tt.opts.after/2)
		})
	}
}
