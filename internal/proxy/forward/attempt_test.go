package forward

import (
	"context"
	"net/http"
	"testing"
)

type attemptKey struct{}

// TestAttemptRequests: the first attempt's request lives in the
// exchange; every retry's is a new request with its own URL and header,
// and making it leaves the earlier attempts' requests as their
// transports saw them.
func TestAttemptRequests(t *testing.T) {
	out, err := http.NewRequest("POST", "http://be.test/p", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	out.Header.Set("X-A", "1")
	var x Exchange
	ctxs := make([]context.Context, 3)
	reqs := make([]*http.Request, 3)
	for i := range reqs {
		ctxs[i] = context.WithValue(context.Background(), attemptKey{}, i)
		reqs[i] = x.attempt(ctxs[i], out, i)
		if reqs[i] == out {
			t.Fatalf("attempt %d is the downstream request itself", i)
		}
		if reqs[i].Context() != ctxs[i] {
			t.Fatalf("attempt %d: context %v, want its own", i, reqs[i].Context().Value(attemptKey{}))
		}
		if reqs[i].Header.Get("X-A") != "1" || reqs[i].URL.String() != "http://be.test/p" || reqs[i].Method != "POST" {
			t.Fatalf("attempt %d: %s %s %v, want the downstream request's", i, reqs[i].Method, reqs[i].URL, reqs[i].Header)
		}
	}
	if reqs[0] != &x.first {
		t.Error("the first attempt's request is not the exchange's own")
	}
	for i, r := range reqs {
		// A later attempt must not have overwritten this one.
		if got := r.Context().Value(attemptKey{}); got != i {
			t.Errorf("attempt %d's request now has attempt %v's context", i, got)
		}
		if i == 0 {
			continue
		}
		if r == &x.first {
			t.Errorf("retry %d's request is the exchange's first", i)
		}
		// A retry's transport may set its URL's host and its header:
		// they are its own, not the downstream request's.
		r.URL.Host = "other"
		r.Header.Set("X-A", "changed")
		if out.URL.Host != "be.test" || out.Header.Get("X-A") != "1" {
			t.Fatalf("retry %d shares its URL or header with the downstream request", i)
		}
	}
}
