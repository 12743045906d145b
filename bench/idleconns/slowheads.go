package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// slowHeadLine is the size of one header line of a slow head: 90 of them
// make a 59 KB head, under Envoy's default max_headers_count (100) and
// max_request_headers_kb (60), so that the proxy must hold it rather than
// refuse it.
const slowHeadLine = 640

// runSlowHeads opens n connections to addr at once; each sends a request
// line and header lines of about headBytes in all, evenly over trickle,
// and never the empty line that ends the head. Once every head is in and
// settle passed, it reads the proxy's VmRSS (held) and VmHWM (peak).
func runSlowHeads(addr string, n, pid, headBytes int, trickle, settle time.Duration, path string) error {
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
	lines := max(headBytes/slowHeadLine, 1)
	line := "x-slow-%03d: " + strings.Repeat("s", slowHeadLine-len("x-slow-000: \r\n")) + "\r\n"
	gap := trickle / time.Duration(lines)
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				errs <- fmt.Errorf("connection %d: %w", i, err)
				return
			}
			conns[i] = c
			if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: bench\r\nUser-Agent: idleconns\r\n", path); err != nil {
				errs <- fmt.Errorf("connection %d: request line: %w", i, err)
				return
			}
			// Stagger the connections over the first gap, so that
			// their writes spread out.
			time.Sleep(time.Duration(i) * gap / time.Duration(n))
			for j := range lines {
				if _, err := fmt.Fprintf(c, line, j); err != nil {
					errs <- fmt.Errorf("connection %d: header line %d: %w (the proxy closed it)", i, j, err)
					return
				}
				time.Sleep(gap)
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
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	sent := time.Since(start)
	time.Sleep(settle)
	held, err := vmRSS(pid)
	if err != nil {
		return err
	}
	peak, err := procStatus(pid, "VmHWM")
	if err != nil {
		return err
	}
	closed := countClosed(conns)
	fmt.Printf("conns=%d head_bytes=%d send_s=%.1f rss_before_kib=%d rss_held_kib=%d rss_peak_kib=%d kib_per_conn=%.2f closed_by_proxy=%d\n",
		n, lines*slowHeadLine, sent.Seconds(), before, held, peak, float64(held-before)/float64(n), closed)
	if closed > 0 {
		return fmt.Errorf("the proxy closed %d of %d connections with a head in progress: raise its header timeout or limits", closed, n)
	}
	return nil
}
