// Command idleconns measures what idle keep-alive connections cost a proxy:
// it opens -n connections to -addr, sends one GET on each and reads the
// response (so every connection has carried a request and sits idle in
// keep-alive), holds them, and reads the proxy's resident memory (VmRSS in
// /proc/PID/status) before the first connection and after the last one.
// It then checks that the proxy still holds every connection open.
//
// With -h2 the connections are HTTP/2 (h2c with prior knowledge): one GET
// on stream 1 each, its response read whole, then idle.
//
// With -slow-head-bytes it measures slow request heads instead (a
// slowloris): every connection sends a request line and then header
// lines of about that many bytes in all, spread over -trickle, and never
// ends the head; once every head is in, it reads the proxy's VmRSS while
// the proxy holds them and its peak (VmHWM), and checks that the proxy
// still holds every connection.
//
// Output is one line of key=value pairs for scripts (bench/http/idle.sh).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "proxy address (host:port)")
	n := flag.Int("n", 10000, "connections to open and hold")
	pid := flag.Int("pid", 0, "PID of the proxy whose VmRSS is measured (required)")
	parallel := flag.Int("parallel", 64, "connections opened and used at once (bounds the proxy's upstream connections)")
	settle := flag.Duration("settle", 3*time.Second, "wait after the last connection before reading VmRSS")
	path := flag.String("path", "/", "request path")
	slowHead := flag.Int("slow-head-bytes", 0, "measure slow request heads of about this many bytes instead of idle connections (0: idle connections)")
	trickle := flag.Duration("trickle", 20*time.Second, "with -slow-head-bytes: how long each connection takes to send its head")
	h2 := flag.Bool("h2", false, "idle HTTP/2 connections (h2c with prior knowledge, one request on stream 1 each) instead of HTTP/1.1 ones")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "idleconns")
	var err error
	if *slowHead > 0 {
		err = runSlowHeads(*addr, *n, *pid, *slowHead, *trickle, *settle, *path)
	} else {
		use := use
		if *h2 {
			use = useH2
		}
		err = run(*addr, *n, *pid, *parallel, *settle, *path, use)
	}
	if err != nil {
		logger.Error("connection memory benchmark failed", "error", err)
		os.Exit(1)
	}
}

func run(addr string, n, pid, parallel int, settle time.Duration, path string, use func(addr, path string) (net.Conn, error)) error {
	if pid <= 0 {
		return errors.New("-pid is required: the PID of the proxy process to measure")
	}
	if err := raiseNoFile(uint64(n) + 256); err != nil {
		return err
	}
	before, err := vmRSS(pid)
	if err != nil {
		return err
	}
	conns := make([]net.Conn, n)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := use(addr, path)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("connection %d: %w", i, err) })
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if firstErr != nil {
		return firstErr
	}
	opened := time.Since(start)
	time.Sleep(settle)
	after, err := vmRSS(pid)
	if err != nil {
		return err
	}
	closed := countClosed(conns)
	fmt.Printf("conns=%d open_s=%.1f rss_before_kib=%d rss_after_kib=%d kib_per_conn=%.2f closed_by_proxy=%d\n",
		n, opened.Seconds(), before, after, float64(after-before)/float64(n), closed)
	if closed > 0 {
		return fmt.Errorf("the proxy closed %d of %d idle connections during the hold: raise its idle timeout or connection limit", closed, n)
	}
	return nil
}

// use dials addr, sends one keep-alive GET and reads the whole response.
func use(addr, path string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: bench\r\nUser-Agent: idleconns\r\n\r\n", path); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(c, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d, want 200", resp.StatusCode)
	}
	if err == nil && (resp.Close || br.Buffered() > 0) {
		err = errors.New("the proxy did not keep the connection alive after the response")
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// countClosed reports how many connections the peer has closed (a read
// returns EOF or an error other than the short deadline expiring; bytes,
// such as an HTTP/2 frame sent late, mean open).
func countClosed(conns []net.Conn) int {
	closed := 0
	var b [1]byte
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		n, err := c.Read(b[:])
		var ne net.Error
		if n == 0 && !(errors.As(err, &ne) && ne.Timeout()) {
			closed++
		}
	}
	return closed
}

// vmRSS returns the resident set size of pid in KiB.
func vmRSS(pid int) (int64, error) { return procStatus(pid, "VmRSS") }

// procStatus returns the field key (in KiB) of /proc/PID/status: VmRSS
// for the resident set size, VmHWM for its peak.
func procStatus(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the proxy's memory (-pid %d): %w", pid, err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// raiseNoFile raises this process's open-file limit to at least want.
func raiseNoFile(want uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	if l.Cur >= want {
		return nil
	}
	l.Cur = want
	if l.Max < want {
		l.Max = want // needs root (CAP_SYS_RESOURCE)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("raising the open-file limit to %d for %d connections (run as root or ulimit -n): %w", want, want-256, err)
	}
	return nil
}
