package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHandlerReportsVersionAndRemote(t *testing.T) {
	srv := httptest.NewServer(handler("v2", "echo-v2"))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep Reply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != "v2" || rep.Pod != "echo-v2" || rep.Path != "/hello" || rep.Remote == "" {
		t.Fatalf("reply = %+v", rep)
	}
	if got := resp.Header.Get("X-Echo-Version"); got != "v2" {
		t.Fatalf("X-Echo-Version = %q", got)
	}
}
