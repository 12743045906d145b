package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

type ctxKey struct{}

// TestStreamCtx: the stream's own context behaves as context.WithCancel's
// does for what the proxy does with it: values and the deadline from the
// parent, AfterFunc and its stop, children. (Its Done, Err and AfterFunc
// are ctxend.Core's, tested in that package: the first slot's generation,
// Done asked for after the end.)
func TestStreamCtx(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	x := &streamCtx{parent: parent}
	if x.Value(ctxKey{}) != "v" {
		t.Error("the parent's value is not seen")
	}
	if _, ok := x.Deadline(); ok {
		t.Error("a deadline the parent does not have")
	}
	if x.Err() != nil {
		t.Fatal("Err before cancel")
	}
	child, cancelChild := context.WithCancel(x)
	defer cancelChild()
	timed, cancelTimed := context.WithTimeout(x, time.Hour)
	defer cancelTimed()
	var ran, stopped atomic.Int32
	afterRan := make(chan struct{})
	context.AfterFunc(x, func() { ran.Add(1); close(afterRan) })
	stop := x.AfterFunc(func() { stopped.Add(1) })
	if !stop() {
		t.Error("stop of a function that had not run returned false")
	}
	if stop() {
		t.Error("a second stop returned true")
	}
	done := x.Done()
	select {
	case <-done:
		t.Fatal("Done closed before cancel")
	default:
	}
	x.cancel()
	x.cancel() // once
	for _, c := range []context.Context{x, child, timed} {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context did not end with the stream's")
		}
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), context.Canceled) {
			t.Errorf("Err %v, Cause %v; want context.Canceled", c.Err(), context.Cause(c))
		}
	}
	<-afterRan
	if late := x.AfterFunc(func() {}); late() {
		t.Error("stop after the end returned true")
	}
	time.Sleep(10 * time.Millisecond)
	if ran.Load() != 1 || stopped.Load() != 0 {
		t.Errorf("AfterFunc ran %d times, the stopped one %d; want 1, 0", ran.Load(), stopped.Load())
	}
}

// TestResetCancelsDerived: a reset stream ends the contexts a handler
// derived from its request's, and a handler's return ends them too.
func TestResetCancelsDerived(t *testing.T) {
	derived := make(chan context.Context, 2)
	addr := ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Hour)
		defer cancel()
		after := make(chan struct{})
		context.AfterFunc(r.Context(), func() { close(after) })
		derived <- context.WithoutCancel(ctx) // values only; ctx itself below
		if r.URL.Path == "/wait" {
			<-ctx.Done()
			<-after
		}
		derived <- ctx
	}), Config{})
	r := dialRaw(t, addr)
	r.get(1, "/wait")
	r.flush()
	<-derived
	_ = r.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	r.flush()
	select {
	case ctx := <-derived:
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("the derived context's Err is %v after the reset", ctx.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RST_STREAM did not end the contexts derived from the request's")
	}
	ctxs := make(chan context.Context, 1)
	addr = ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ctxs <- r.Context() }), Config{})
	r = dialRaw(t, addr)
	r.get(1, "/")
	r.flush()
	reqCtx := <-ctxs
	select {
	case <-reqCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the request's context did not end when its handler returned")
	}
}

// TestCancellableParent: under a parent that can end, the request's
// context ends with it (the path through context.WithCancel).
func TestCancellableParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	ended := make(chan struct{})
	addr := listen(t, func(nc net.Conn) {
		New(wbatch.New(nc), Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-r.Context().Done()
			close(ended)
		})}).Serve(parent)
	})
	r := dialRaw(t, addr)
	r.get(1, "/")
	r.flush()
	<-started
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the parent's end did not reach the request's context")
	}
	r.c.Close()
}

// TestParsePlainPath: what parsePlainPath parses, it parses as
// url.ParseRequestURI does; what it leaves, it leaves untouched.
func TestParsePlainPath(t *testing.T) {
	paths := []string{
		"/", "/a", "/echo.EchoService/Echo", "//double", "/a?", "/a?b", "/a?b?", "/a??", "/a?b=c&d=%20e",
		"/a?x#frag", "/a#frag", "/a%20b", "/a b", "/a?b c", "/a?\x7f", "/\x01", "/a:b", "/a@b", "/a+b",
		"/é", "/a?é", "*", "", "a", "/a/../b", "/~user/./x", "/A-Z_0.9~",
	}
	for i := range 2000 { // and some noise
		const alphabet = "/a?%#é \x00+:.~Z9-_="
		b := []byte{'/'}
		for j := range i % 7 {
			b = append(b, alphabet[(i*7+j*13)%len(alphabet)])
		}
		paths = append(paths, string(b))
	}
	plain := 0
	for _, p := range paths {
		var u url.URL
		if !parsePlainPath(&u, p) {
			if u != (url.URL{}) {
				t.Errorf("%q: not plain, but u was written: %+v", p, u)
			}
			continue
		}
		plain++
		want, err := url.ParseRequestURI(p)
		if err != nil {
			t.Errorf("%q: plain, but ParseRequestURI fails: %v", p, err)
			continue
		}
		if u != *want {
			t.Errorf("%q: parsed %+v, ParseRequestURI %+v", p, u, *want)
		}
	}
	if plain < 20 {
		t.Errorf("only %d paths were plain", plain)
	}
}

type attachedKey struct{}

// TestSetStreamValueCancelStream: a handler attaches one value to its
// stream's context in place and ends the context through CancelStream, as
// context.WithValue and WithCancel would give it; other contexts are left
// to those.
func TestSetStreamValueCancelStream(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	x := &streamCtx{parent: parent}
	child, cancelChild := context.WithCancel(x)
	defer cancelChild()
	if !SetStreamValue(x, attachedKey{}, 7) {
		t.Fatal("SetStreamValue refused a stream context")
	}
	if SetStreamValue(x, ctxKey{}, "w") {
		t.Error("a second value was attached")
	}
	if x.Value(attachedKey{}) != 7 || child.Value(attachedKey{}) != 7 {
		t.Error("the attached value is not seen from the context or its child")
	}
	if x.Value(ctxKey{}) != "v" {
		t.Error("the parent's value is hidden by the attached one")
	}
	if SetStreamValue(parent, attachedKey{}, 1) || CancelStream(parent) || CancelStream(child) {
		t.Error("a context that is not a stream's was taken as one")
	}
	if !CancelStream(x) {
		t.Fatal("CancelStream refused a stream context")
	}
	if !errors.Is(x.Err(), context.Canceled) {
		t.Errorf("Err after CancelStream = %v, want context.Canceled", x.Err())
	}
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a child of the stream context did not end with it")
	}
	x.cancel() // the stream's own end after the handler's: once
}

// TestParkNeedsHost: a connection that may park tells its Handler about
// its socket, so a Handler that cannot hear it is refused at Init, not
// at the first park.
func TestParkNeedsHost(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Init took Config.Park with a Handler that is not a Host")
		}
	}()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	New(wbatch.New(c), Config{Handler: http.NotFoundHandler(), Park: &Parking{}})
}
