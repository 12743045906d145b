package tracing

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DialFunc connects to one endpoint of a cluster (the proxy's cluster
// manager).
type DialFunc func(ctx context.Context, cluster string) (net.Conn, error)

// ReportersOptions configure Reporters.
type ReportersOptions struct {
	Logger *slog.Logger
	Dial   DialFunc
	// QueueSize bounds the spans waiting for a collector (default 4096);
	// more are dropped. BatchSize is the most spans in one export
	// (default 256); FlushInterval how long a span waits for a batch to
	// fill (default 1 s).
	QueueSize, BatchSize int
	FlushInterval        time.Duration
}

// Reporters are a proxy's span reporters, one per Provider (collector
// and format), shared by every HCM that names it and kept across
// listener updates. Safe for concurrent use.
type Reporters struct {
	// Set at creation, read-only.
	o      ReportersOptions
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // guards byKey and closed
	byKey  map[Provider]*reporter
	closed bool
	wg     sync.WaitGroup
}

// NewReporters returns the proxy's reporters; Close stops them.
func NewReporters(o ReportersOptions) *Reporters {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 4096
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Reporters{o: o, log: o.Logger.With("component", "tracing"), ctx: ctx, cancel: cancel, byKey: map[Provider]*reporter{}}
}

// For returns the reporter of p, started on first use.
func (r *Reporters) For(p Provider) Reporter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rep, ok := r.byKey[p]; ok {
		return rep
	}
	rep := &reporter{p: p, queue: make(chan *Span, r.o.QueueSize), log: r.log.With("cluster", p.Cluster)}
	switch p.Kind {
	case KindOTLP:
		rep.export = newOTLPExporter(p, r.o.Dial)
	default:
		rep.export = newZipkinExporter(p, r.o.Dial)
	}
	r.byKey[p] = rep
	if !r.closed {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			rep.run(r.ctx, r.o.BatchSize, r.o.FlushInterval)
		}()
	}
	return rep
}

// Close stops the reporters (spans still queued are sent once, within
// a second) and waits for them.
func (r *Reporters) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// Stats are a reporter's counters (Envoy's tracing.zipkin.spans_sent,
// reports_dropped, …).
type Stats struct {
	Sent, Dropped, Failed uint64
}

// Stats sums the counters of every reporter.
func (r *Reporters) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s Stats
	for _, rep := range r.byKey {
		s.Sent += rep.sent.Load()
		s.Dropped += rep.dropped.Load()
		s.Failed += rep.failed.Load()
	}
	return s
}

// exporter sends one batch to a collector.
type exporter interface {
	export(ctx context.Context, spans []*Span) error
	close()
}

// reporter queues spans for one collector; its goroutine (run) owns the
// batch and the exporter.
type reporter struct {
	p      Provider
	queue  chan *Span
	export exporter
	log    *slog.Logger

	sent, dropped, failed atomic.Uint64
}

// Report queues sp, or drops it when the queue is full: a slow or absent
// collector never slows a request.
func (rep *reporter) Report(sp *Span) {
	select {
	case rep.queue <- sp:
	default:
		rep.dropped.Add(1)
	}
}

func (rep *reporter) run(ctx context.Context, batchSize int, every time.Duration) {
	defer rep.export.close()
	batch := make([]*Span, 0, batchSize)
	tick := time.NewTicker(every)
	defer tick.Stop()
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		timeout := rep.p.Timeout
		if timeout <= 0 {
			timeout = 5 * time.Second
		}
		ectx, cancel := context.WithTimeout(ctx, timeout)
		err := rep.export.export(ectx, batch)
		cancel()
		if err != nil {
			rep.failed.Add(uint64(len(batch)))
			rep.log.Warn("span export failed", "spans", len(batch), "error", err)
		} else {
			rep.sent.Add(uint64(len(batch)))
		}
		clear(batch)
		batch = batch[:0]
	}
	for {
		select {
		case sp := <-rep.queue:
			batch = append(batch, sp)
			if len(batch) >= batchSize {
				flush(ctx)
			}
		case <-tick.C:
			flush(ctx)
		case <-ctx.Done():
			for {
				select {
				case sp := <-rep.queue:
					if len(batch) < batchSize {
						batch = append(batch, sp)
					}
					continue
				default:
				}
				break
			}
			last, cancel := context.WithTimeout(context.Background(), time.Second)
			flush(last) //nolint:contextcheck // the last flush outlives the cancelled context, bounded by its own second
			cancel()
			return
		}
	}
}
