package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/localmesh"
)

// reply is one HTTP exchange as the tests judge it: the status, headers
// and body, strait-echo's version, pod and remote address when it
// answered, or the error that ended the exchange.
type reply struct {
	status  int
	version string
	pod     string
	remote  string
	header  http.Header
	body    []byte
	err     error
}

// String describes a reply for failure messages.
func (r reply) String() string {
	if r.err != nil {
		return "error " + r.err.Error()
	}
	s := fmt.Sprintf("status %d", r.status)
	if r.pod != "" || r.version != "" {
		s += fmt.Sprintf(" from pod %q version %q", r.pod, r.version)
	} else if b := strings.TrimSpace(string(r.body)); b != "" {
		s += fmt.Sprintf(" body %.200q", b)
	}
	return s
}

// send makes one request with c. A transport error, or a JSON answer
// that is not strait-echo's, is in reply.err.
func send(ctx context.Context, c *http.Client, method, url, host string, h http.Header) reply {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return reply{err: err}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: fmt.Errorf("%s %s: %w", method, url, err)}
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		r.err = fmt.Errorf("%s %s: body: %w", method, url, err)
		return r
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var e localmesh.EchoReply
		if err := json.Unmarshal(r.body, &e); err != nil {
			r.err = fmt.Errorf("%s %s: reply %q: %w", method, url, r.body, err)
			return r
		}
		r.version, r.pod, r.remote = e.Version, e.Pod, e.Remote
	}
	return r
}

// get sends a GET with c; a transport error fails the test (not at
// once: the reply's status is then 0).
func get(t *testing.T, ctx context.Context, c *http.Client, url string, h http.Header) reply {
	t.Helper()
	r := send(ctx, c, http.MethodGet, url, "", h)
	if r.err != nil && r.status == 0 {
		t.Errorf("%v", r.err)
	}
	return r
}

// podGet sends one GET from the pod on a new connection, so that every
// request meets the current config, with an optional Host.
func podGet(ctx context.Context, p *localmesh.Pod, url, host string) reply {
	c := p.NewHTTPClient(false)
	defer c.CloseIdleConnections()
	return send(ctx, c, http.MethodGet, url, host, nil)
}

// request is podGet as status, strait-echo's reply and error.
func request(ctx context.Context, p *localmesh.Pod, url, host string) (int, localmesh.EchoReply, error) {
	r := podGet(ctx, p, url, host)
	return r.status, localmesh.EchoReply{Version: r.version, Pod: r.pod, Remote: r.remote}, r.err
}

// keyCount is strait-echo's count of the requests it saw with x-echo-key
// key, and the Host of the last, asked with c at base (scheme and
// authority of a strait-echo or a service of it).
func keyCount(t *testing.T, ctx context.Context, c *http.Client, base, key string) (int, string) {
	t.Helper()
	r := send(ctx, c, http.MethodGet, base+"/_echo/count?key="+key, "", nil)
	if r.err != nil {
		t.Fatalf("count of key %s: %v", key, r.err)
	}
	var kc struct {
		Count int    `json:"count"`
		Host  string `json:"host"`
	}
	if err := json.Unmarshal(r.body, &kc); err != nil {
		t.Fatalf("count of key %s: %s: %v", key, r, err)
	}
	return kc.Count, kc.Host
}
