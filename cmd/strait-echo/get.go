package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// getResult is one line of `strait-echo get`'s output.
type getResult struct {
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Reply is the echo's answer when the body was one.
	Reply *Reply `json:"reply,omitempty"`
}

// runGet is `strait-echo get [-n N] [-interval D] [-timeout D]
// [-header NAME=VALUE]... URL`: the client side, for tests that exec into
// a pod. It sends N GETs, one after the other with a fresh connection each
// (so every request is routed and load-balanced anew), with the given
// headers (e.g. x-echo-key, so that a test can count them at the server),
// and writes one JSON line per request: the status and the echo's reply,
// or the error. It exits 0 whatever the answers: the caller counts them.
func runGet(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("strait-echo get", flag.ContinueOnError)
	n := fs.Int("n", 1, "number of requests")
	interval := fs.Duration("interval", 0, "pause between requests")
	timeout := fs.Duration("timeout", 5*time.Second, "timeout of each request")
	header := http.Header{}
	fs.Func("header", "request header NAME=VALUE (repeatable)", func(kv string) error {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("header %q: want NAME=VALUE, e.g. x-echo-key=drain", kv)
		}
		header.Add(name, value)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("get: want one URL, got %d arguments (strait-echo get [-n N] [-interval D] URL)", fs.NArg())
	}
	url := fs.Arg(0)
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	enc := json.NewEncoder(out)
	for i := 0; i < *n; i++ {
		if i > 0 && *interval > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(*interval):
			}
		}
		if err := enc.Encode(getOnce(ctx, client, url, header)); err != nil {
			return err
		}
	}
	return nil
}

func getOnce(ctx context.Context, client *http.Client, url string, header http.Header) getResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return getResult{Error: err.Error()}
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if h := header.Get("Host"); h != "" {
		// net/http sends req.Host, not a Host header: -header Host=NAME
		// calls an address (a VIP) by a service's name.
		req.Host = h
	}
	resp, err := client.Do(req)
	if err != nil {
		return getResult{Error: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	res := getResult{Status: resp.StatusCode}
	if err != nil {
		res.Error = "read body: " + err.Error()
		return res
	}
	var rep Reply
	if json.Unmarshal(body, &rep) == nil {
		res.Reply = &rep
	}
	return res
}
