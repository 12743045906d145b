package hcm

import (
	"net/http"
	"regexp"
	"testing"
)

// TestAddForwardHeadersStorage: with the stream's storage, the generated
// x-request-id is written into it and costs no allocation; without it,
// the id is allocated; a client's id is kept either way. xfpVal is the
// storage's x-forwarded-proto slot, nil without storage.
func TestAddForwardHeadersStorage(t *testing.T) {
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	var m streamMem
	out := &http.Request{Header: http.Header{}}
	addForwardHeaders(out, &http.Request{}, &m)
	rid := out.Header["X-Request-Id"]
	if len(rid) != 1 || !uuid4.MatchString(rid[0]) || &rid[0] != &m.rid[0] || string(m.ridBytes[:]) != rid[0] {
		t.Errorf("with storage: x-request-id %q, storage %q", rid, m.ridBytes)
	}
	h, in := http.Header{}, &http.Request{}
	again := &http.Request{Header: h}
	if n := testing.AllocsPerRun(50, func() {
		delete(h, "X-Request-Id")
		addForwardHeaders(again, in, &m)
	}); n != 0 {
		t.Errorf("with storage: %v allocations, want 0", n)
	}
	out = &http.Request{Header: http.Header{}}
	addForwardHeaders(out, &http.Request{}, nil)
	if rid2 := out.Header.Get("X-Request-Id"); !uuid4.MatchString(rid2) || rid2 == rid[0] {
		t.Errorf("without storage: x-request-id %q (the other %q)", rid2, rid[0])
	}
	for _, mm := range []*streamMem{nil, {}} {
		out = &http.Request{Header: http.Header{"X-Request-Id": {"mine"}}}
		addForwardHeaders(out, &http.Request{}, mm)
		if got := out.Header["X-Request-Id"]; len(got) != 1 || got[0] != "mine" {
			t.Errorf("storage %v: x-request-id %q, want the client's", mm != nil, got)
		}
	}
	if (*streamMem)(nil).xfpVal() != nil || m.xfpVal() != &m.xfp {
		t.Error("xfpVal: want nil without storage, the storage's slot with it")
	}
}
