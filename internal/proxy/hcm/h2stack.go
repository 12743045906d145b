package hcm

import "net/http"

// x/net/http2 serves each stream on a goroutine of its own, whose stack
// starts small (the runtime's average) and is copied to a larger one when
// the request path goes deeper (routing, the filters, the upstream round
// trip): runtime.newstack/copystack, which walks and adjusts every frame
// on the stack, took 4% of a gRPC hop's CPU and 9% of an HTTP/2-to-HTTP/1.1
// hop's (bench/http), paid on every stream. Growing the stack once at the
// top of the handler, while it holds a handful of frames, costs a copy of
// those. (A pool of workers
// that keep their grown stacks, as grpc-go's server has, measured no
// better: the hand-off to the worker costs what the copy did.)

// streamStackFrame is the stack frame growStack makes room for: with the
// frames above it, the stream's stack grows to 16 KiB, what the request
// path reaches (BenchmarkProxyGRPCUnary's profile shows no newstack under
// serveStream with it).
const streamStackFrame = 10 << 10

// withGrownStack runs h on a stack that has grown to what the request path
// needs before h goes deep.
func withGrownStack(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		growStack(false)
		h(w, r)
	}
}

// growStack has a frame of streamStackFrame bytes, which the runtime makes
// room for (its prologue checks the whole frame) by growing the
// goroutine's stack. The frame is never written: the array lives in a
// branch that callers never take (use false), so it is not cleared.
//
//go:noinline
func growStack(use bool) {
	if use {
		var b [streamStackFrame]byte
		keepFrame(b[:])
	}
}

// keepFrame keeps growStack's frame from being optimized away.
//
//go:noinline
func keepFrame(b []byte) { b[0] = 1 }
