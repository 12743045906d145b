package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Identity is who a socket made by DialContextAs / ListenAs belongs to, as
// iptables' owner match (--uid-owner/--gid-owner) sees it.
type Identity struct {
	UID, GID int
}

// Do runs fn on an OS thread that has entered the pod's network namespace
// (and, if id is not nil, taken id's filesystem UID/GID, which is what the
// owner match reads from a socket). Sockets fn creates stay in the pod's
// namespace and keep that owner after Do returns. fn must not start
// goroutines that create sockets.
func (p *Pod) Do(id *Identity, fn func() error) error {
	ns, err := os.Open(p.NetnsPath())
	if err != nil {
		return fmt.Errorf("testenv: pod %s: %w", p.Name, err)
	}
	defer ns.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is returned to the runtime only if every change
		// was undone; otherwise it exits with this goroutine.
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			restored = true
			errc <- fmt.Errorf("testenv: setns %s: %w", p.Netns, err)
			return
		}
		var fnErr error
		idOK := true
		if id != nil {
			idOK, fnErr = asIdentity(*id, fn)
		} else {
			fnErr = fn()
		}
		if !idOK {
			errc <- errors.Join(fnErr, errors.New("testenv: could not restore the thread's fsuid/fsgid"))
			return
		}
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(fnErr, fmt.Errorf("testenv: setns back: %w", err))
			return
		}
		restored = true
		errc <- fnErr
	}()
	return <-errc
}

// asIdentity runs fn with the calling (locked) thread's fsuid/fsgid set to
// id. restored is false if they could not be set back; the thread must
// then not be reused.
func asIdentity(id Identity, fn func() error) (restored bool, err error) {
	// setfsuid/setfsgid are per-thread system calls.
	oldGID, err := unix.SetfsgidRetGid(id.GID)
	if err != nil {
		return true, fmt.Errorf("testenv: setfsgid %d: %w", id.GID, err)
	}
	oldUID, err := unix.SetfsuidRetUid(id.UID)
	if err != nil {
		_, _ = unix.SetfsgidRetGid(oldGID)
		return gidIs(oldGID), fmt.Errorf("testenv: setfsuid %d: %w", id.UID, err)
	}
	err = fn()
	_, _ = unix.SetfsuidRetUid(oldUID)
	_, _ = unix.SetfsgidRetGid(oldGID)
	// An invalid id (-1) changes nothing and returns the current value.
	cur, _ := unix.SetfsuidRetUid(-1)
	return cur == oldUID && gidIs(oldGID), err
}

func gidIs(gid int) bool {
	cur, _ := unix.SetfsgidRetGid(-1)
	return cur == gid
}

// DialContext dials from inside the pod, as the calling process (root).
// Use IP addresses: the pod has no DNS.
func (p *Pod) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return p.dial(ctx, nil, network, addr)
}

// DialContextAs dials from inside the pod with a socket owned by id, so
// that iptables sees the connection as that user's (e.g. the proxy's 1337).
func (p *Pod) DialContextAs(ctx context.Context, id Identity, network, addr string) (net.Conn, error) {
	return p.dial(ctx, &id, network, addr)
}

func (p *Pod) dial(ctx context.Context, id *Identity, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := p.Do(id, func() error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// Listen listens inside the pod (e.g. "tcp", ":15001").
func (p *Pod) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := p.Do(nil, func() error {
		var lc net.ListenConfig
		var err error
		l, err = lc.Listen(ctx, network, addr)
		return err
	})
	return l, err
}

// HTTPClient returns a client whose connections are made inside the pod.
func (p *Pod) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       p.DialContext,
		DisableKeepAlives: true,
		Proxy:             nil,
	}}
}

// HTTPGet does GET url from inside the pod and returns the status and body.
func (p *Pod) HTTPGet(ctx context.Context, url string) (status int, body []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := p.HTTPClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, body, err
}
