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
		debounce(ctx, in, opts, func(req *model.PushRequest, events int, _ time.Duration) {
			out <- firedPush{req: req, events: events, at: time.Now()}
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
