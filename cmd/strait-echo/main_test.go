package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerReportsVersionAndRemote(t *testing.T) {
	srv := httptest.NewServer(handler("v2", "echo-v2"))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/hello%2Fx/..")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep Reply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != "v2" || rep.Pod != "echo-v2" || rep.Path != "/hello/x/.." || rep.RawPath != "/hello%2Fx/.." || rep.Remote == "" {
		t.Fatalf("reply = %+v", rep)
	}
	if got := resp.Header.Get("X-Echo-Version"); got != "v2" {
		t.Fatalf("X-Echo-Version = %q", got)
	}
}

func TestHandlerBehaviours(t *testing.T) {
	srv := httptest.NewServer(newHandler("v1", "p", 0))
	defer srv.Close()
	do := func(h map[string]string) (*http.Response, Reply) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x?a=b", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep Reply
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		return resp, rep
	}
	resp, rep := do(map[string]string{"X-Echo-Status": "418", "X-Echo-Response-Header": "X-A=1"})
	if resp.StatusCode != 418 || resp.Header.Get("X-A") != "1" || rep.Method != "POST" || rep.Query != "a=b" {
		t.Fatalf("status %d, X-A %q, reply %+v", resp.StatusCode, resp.Header.Get("X-A"), rep)
	}
	fail := map[string]string{"X-Echo-Key": "k", "X-Echo-Fail": "2", "X-Echo-Fail-Status": "500"}
	for i, want := range []int{500, 500, 200} {
		resp, rep := do(fail)
		if resp.StatusCode != want || rep.Attempt != i+1 {
			t.Fatalf("attempt %d: status %d, reply attempt %d", i+1, resp.StatusCode, rep.Attempt)
		}
	}
	cr, err := http.Get(srv.URL + "/_echo/count?key=k")
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Body.Close()
	var c keyCount
	if err := json.NewDecoder(cr.Body).Decode(&c); err != nil || c.Count != 3 || c.Host != strings.TrimPrefix(srv.URL, "http://") {
		t.Fatalf("count = %+v, %v; want 3 and the host the requests carried", c, err)
	}
}

func TestStatusFlagForcesEveryAnswer(t *testing.T) {
	srv := httptest.NewServer(newHandler("v1", "p", 500))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(newHandler("v7", "p", 0))
	defer srv.Close()
	var out bytes.Buffer
	if err := runGet(context.Background(), []string{"-n", "3", srv.URL + "/x"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		var r getResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != 200 || r.Reply == nil || r.Reply.Version != "v7" || r.Reply.Path != "/x" {
			t.Errorf("line %s: want status 200 and the echo's reply for /x from v7", l)
		}
	}
	// A closed server: an error line per request, and still exit 0.
	srv.Close()
	out.Reset()
	if err := runGet(context.Background(), []string{"-n", "2", srv.URL}, &out); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r getResult
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Error == "" || r.Status != 0 {
			t.Errorf("line %q: want an error and no status", l)
		}
	}
	if err := runGet(context.Background(), nil, &out); err == nil {
		t.Error("get without a URL: no error")
	}
}

// TestGetHeader: -header sends its headers on every request (the echo
// counts x-echo-key), and a header without "=" is refused by name.
func TestGetHeader(t *testing.T) {
	srv := httptest.NewServer(newHandler("v1", "p", 0))
	defer srv.Close()
	var out bytes.Buffer
	if err := runGet(context.Background(), []string{"-n", "2", "-header", "x-echo-key=k", "-header", "X-Other=a=b", srv.URL}, &out); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r getResult
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Reply == nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if r.Reply.Attempt != i+1 || r.Reply.Headers["X-Other"] != "a=b" {
			t.Errorf("request %d: attempt %d, X-Other %q; want attempt %d and a=b", i+1, r.Reply.Attempt, r.Reply.Headers["X-Other"], i+1)
		}
	}
	if err := runGet(context.Background(), []string{"-header", "x-echo-key", srv.URL}, &out); err == nil || !strings.Contains(err.Error(), `"x-echo-key"`) {
		t.Errorf("-header without a value: %v, want an error naming it", err)
	}
}

// TestHandlerCall: x-echo-call makes the echo GET the URL first, passing
// on end-user and x-request-id but not its own x-echo-* headers; the
// reply carries the call's status and version, or its error.
func TestHandlerCall(t *testing.T) {
	var seen http.Header
	ratings := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		newHandler("r1", "ratings", 0).ServeHTTP(w, r)
	}))
	defer ratings.Close()
	reviews := httptest.NewServer(newHandler("v2", "reviews", 0))
	defer reviews.Close()
	get := func(target string) Reply {
		req, _ := http.NewRequest(http.MethodGet, reviews.URL+"/", nil)
		req.Header.Set("X-Echo-Call", target)
		req.Header.Set("End-User", "jason")
		req.Header.Set("X-Request-Id", "id-1")
		req.Header.Set("X-Echo-Status", "418")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep Reply
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := get(ratings.URL + "/ratings")
	if rep.Version != "v2" || rep.Call == nil || rep.Call.Status != 200 || rep.Call.Version != "r1" || rep.Call.Error != "" {
		t.Fatalf("reply %+v, call %+v; want v2 with a 200 call to r1", rep, rep.Call)
	}
	if seen.Get("End-User") != "jason" || seen.Get("X-Request-Id") != "id-1" || seen.Get("X-Echo-Status") != "" || seen.Get("X-Echo-Call") != "" {
		t.Errorf("the call carried %v; want end-user and x-request-id only", seen)
	}
	ratings.Close()
	if rep := get(ratings.URL + "/ratings"); rep.Call == nil || rep.Call.Error == "" || rep.Call.Status != 0 {
		t.Errorf("call to a closed server: %+v, want its error", rep.Call)
	}
}
