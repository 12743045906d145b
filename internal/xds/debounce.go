package xds

import (
	"context"
	"time"

	"github.com/straitmesh/strait/internal/proxypush"
)

// debounceOptions are the debounce settings taken from Options.
type debounceOptions struct {
	// after is the quiet period: a push fires this long after the last event.
	after time.Duration
	// max caps the wait: a push fires at most this long after the first event.
	max time.Duration
	// skipEDS lets endpoint-only requests (Full=false) bypass debouncing.
	skipEDS bool
	// edsLeadingEdge pushes an endpoint-only request at once when the
	// debouncer is idle: nothing merged is pending and no request arrived
	// during the last after. Requests arriving within after of it are
	// debounced as usual.
	edsLeadingEdge bool
}

// debounce merges the requests read from ch and calls push with the merged
// request once no request has arrived for opts.after, or opts.max after the
// first merged request, whichever is sooner. events is the number of requests
// merged; waited is the time from the first of them to the push. push runs on
// the debounce goroutine, so it must not block for long (the server's push
// only enqueues). debounce returns when ctx is done; a pending merged request
// is dropped then.
//
// Two options push an endpoint-only request (Full=false) at once, with
// events 1 and waited 0, instead of merging it: opts.skipEDS always, and
// opts.edsLeadingEdge when the debouncer is idle, that is nothing merged is
// pending and no request of any kind arrived during the last opts.after.
// A leading-edge push counts as an arrival, so the requests of a burst that
// follow it start a normal debounce window: they are merged, keep all their
// reasons and are capped by opts.max. An isolated endpoints change is then
// pushed without waiting, and a burst costs one push more than without the
// option. Full requests are never pushed on the leading edge.
func debounce(ctx context.Context, ch <-chan *proxypush.PushRequest, opts debounceOptions, push func(req *proxypush.PushRequest, events int, waited time.Duration)) {
	var (
		// merged holds the requests of the window; Batch adds each in
		// time linear in its size (Merge would copy the whole window per
		// event, O(n²) over a burst).
		merged      proxypush.Batch
		first, last time.Time
		events      int
		timerC      <-chan time.Time
		// seen is when the last request that went through debouncing
		// or the leading edge arrived.
		seen time.Time
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	deadline := func() time.Time {
		quiet, capped := last.Add(opts.after), first.Add(opts.max)
		if capped.Before(quiet) {
			return capped
		}
		return quiet
	}
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-ch:
			if opts.skipEDS && !r.Full {
				push(r, 1, 0)
				continue
			}
			now := time.Now()
			idle := events == 0 && (seen.IsZero() || now.Sub(seen) >= opts.after)
			seen = now
			if opts.edsLeadingEdge && !r.Full && idle {
				push(r, 1, 0)
				continue
			}
			if events == 0 {
				first = now
			}
			last = now
			events++
			merged.Add(r)
			// Since Go 1.23 Reset discards a value the timer may already
			// have sent, so no drain is needed.
			timer.Reset(deadline().Sub(now))
			timerC = timer.C
		case <-timerC:
			if d := time.Until(deadline()); d > 0 {
				timer.Reset(d)
				continue
			}
			push(merged.Request(), events, time.Since(first))
			merged, events, timerC = proxypush.Batch{}, 0, nil
		}
	}
}
