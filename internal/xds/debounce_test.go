package xds

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/straitmesh/strait/internal/proxypush"
)

type firedPush struct {
	req    *proxypush.PushRequest
	events int
	waited time.Duration
	at     time.Time
}

// startDebounce runs debounce until the test ends and returns its input and
// the pushes it fires.
func startDebounce(t *testing.T, opts debounceOptions) (chan<- *proxypush.PushRequest, <-chan firedPush) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan *proxypush.PushRequest)
	out := make(chan firedPush, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		debounce(ctx, in, opts, func(req *proxypush.PushRequest, events int, waited time.Duration) {
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

// The debounce tests run in a synctest bubble: time is virtual and moves
// only when every goroutine of the test waits, so the windows are long
// (as in production), cost no real time, and timings are exact.

func TestDebounceQuietPeriodMergesReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 100 * time.Millisecond
		in, out := startDebounce(t, debounceOptions{after: after, max: 10 * time.Second})
		sent := []proxypush.TriggerReason{proxypush.ConfigUpdate, proxypush.ServiceUpdate, proxypush.EndpointUpdate, proxypush.ConfigUpdate}
		start := time.Now()
		for i, r := range sent {
			if i > 0 {
				time.Sleep(after - time.Millisecond) // inside the quiet period: keeps merging
			}
			in <- &proxypush.PushRequest{Full: r != proxypush.EndpointUpdate, Reason: []proxypush.TriggerReason{r},
				ConfigsUpdated: map[proxypush.ConfigKey]struct{}{{Kind: "K", Name: string(rune('a' + i))}: {}}}
		}
		last := time.Now()
		p := nextPush(t, out, time.Minute)
		if quiet := p.at.Sub(last); quiet != after {
			t.Errorf("push fired %v after the last event, want the quiet period %v", quiet, after)
		}
		if want := last.Sub(start) + after; p.waited != want {
			t.Errorf("push reported waiting %v, want %v (first event to push)", p.waited, want)
		}
		if p.events != len(sent) || !slices.Equal(p.req.Reason, sent) {
			t.Errorf("push merged %d events with reasons %v, want %d with %v", p.events, p.req.Reason, len(sent), sent)
		}
		if !p.req.Full || len(p.req.ConfigsUpdated) != len(sent) {
			t.Errorf("merged request = %+v, want Full with %d configs", p.req, len(sent))
		}
		noPush(t, out, time.Hour)
	})
}

func TestDebounceMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Events keep coming within the quiet period, so only the cap can
		// fire the push.
		const (
			after   = 100 * time.Millisecond
			maxWait = 10 * time.Second
			every   = 30 * time.Millisecond
		)
		in, out := startDebounce(t, debounceOptions{after: after, max: maxWait})
		first := time.Now()
		stop := make(chan struct{})
		feederDone := make(chan struct{})
		go func() {
			defer close(feederDone)
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					select {
					case in <- &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}}:
					case <-stop:
						return
					}
				}
			}
		}()
		in <- &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}}
		p := nextPush(t, out, time.Minute)
		close(stop)
		<-feederDone
		if waited := p.at.Sub(first); waited != maxWait || p.waited != maxWait {
			t.Errorf("push fired %v after the first event (reported %v), want the max wait %v", waited, p.waited, maxWait)
		}
		// The first event and one per tick up to and including the cap.
		if want := 1 + int(maxWait/every); p.events != want || !p.req.Full || len(p.req.Reason) != want {
			t.Errorf("push merged %d events with %d reasons, want %d", p.events, len(p.req.Reason), want)
		}
	})
}

func TestDebounceEDSBypass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 500 * time.Millisecond
		in, out := startDebounce(t, debounceOptions{after: after, max: 10 * time.Second, skipEDS: true})
		sentAt := time.Now()
		in <- &proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}}
		p := nextPush(t, out, time.Minute)
		if p.req.Full || p.at != sentAt || p.events != 1 || p.waited != 0 {
			t.Errorf("endpoint-only push fired after %v (full=%v, events %d, waited %v), want at once", p.at.Sub(sentAt), p.req.Full, p.events, p.waited)
		}
		// Full requests are still debounced.
		sentAt = time.Now()
		in <- &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}}
		p = nextPush(t, out, time.Minute)
		if !p.req.Full || p.at.Sub(sentAt) != after {
			t.Errorf("full push fired after %v, want %v", p.at.Sub(sentAt), after)
		}
	})
}

func TestDebounceEDSDebouncedByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 100 * time.Millisecond
		in, out := startDebounce(t, debounceOptions{after: after, max: 10 * time.Second})
		sentAt := time.Now()
		in <- &proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}}
		in <- &proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}}
		p := nextPush(t, out, time.Minute)
		if p.at.Sub(sentAt) != after || p.events != 2 || p.req.Full {
			t.Errorf("push after %v merging %d events (full=%v), want one EDS push after %v merging 2", p.at.Sub(sentAt), p.events, p.req.Full, after)
		}
	})
}

// debounceStep is one step of a debounce scenario: send a request, or wait
// for the next push and check it.
type debounceStep struct {
	send *proxypush.PushRequest
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
	return debounceStep{send: &proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}}}
}

func sendFull() debounceStep {
	return debounceStep{send: &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}}}
}

func leadingPush() debounceStep { return debounceStep{want: &wantPush{events: 1, leading: true}} }

func debouncedPush(events int, full bool) debounceStep {
	return debounceStep{want: &wantPush{events: events, full: full}}
}

// TestDebounceEDSLeadingEdge runs request sequences through debounce with
// and without edsLeadingEdge. The requests of a step group are sent at the
// same (virtual) instant; a leading push fires at that instant, a debounced
// one exactly min(after, max) after the last request.
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
			synctest.Test(t, func(t *testing.T) {
				in, out := startDebounce(t, tt.opts)
				var (
					lastSend     time.Time
					sent, pushed int
				)
				for i, st := range tt.steps {
					if st.send != nil {
						lastSend = time.Now()
						in <- st.send
						sent++
						continue
					}
					w := st.want
					p := nextPush(t, out, time.Minute)
					pushed += p.events
					if p.events != w.events || p.req.Full != w.full || len(p.req.Reason) != p.events {
						t.Fatalf("step %d: push of %d events (full=%v, reasons %v), want %d events (full=%v)",
							i, p.events, p.req.Full, p.req.Reason, w.events, w.full)
					}
					since := p.at.Sub(lastSend)
					if w.leading {
						if p.waited != 0 || since != 0 {
							t.Fatalf("step %d: push %v after the last request (waited %v), want at once", i, since, p.waited)
						}
						continue
					}
					if wait := min(tt.opts.after, tt.opts.max); p.waited != wait || since != wait {
						t.Fatalf("step %d: push %v after the last request (waited %v), want debounced, %v", i, since, p.waited, wait)
					}
				}
				if pushed != sent {
					t.Errorf("pushes carried %d requests, %d were sent", pushed, sent)
				}
				noPush(t, out, time.Hour)
			})
		})
	}
}
