package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profiler saves Go profiles of a control plane that serves /debug/pprof
// into a directory; without a directory or such a backend it does nothing.
type profiler struct {
	url, dir, prefix string
	trace            bool // execution traces instead of CPU profiles
}

func newProfiler(be backend, dir string) *profiler {
	pb, ok := be.(profiled)
	if dir == "" || !ok {
		return &profiler{}
	}
	prefix := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(strings.ToLower(be.Name()))
	return &profiler{url: pb.PprofURL(), dir: dir, prefix: prefix}
}

// save writes the named profile (heap, goroutine, ...) to DIR/PREFIX-file.pprof.
func (p *profiler) save(file, profile string) {
	if p.url == "" {
		return
	}
	if err := p.fetch(file, p.url+"/"+profile); err != nil {
		fmt.Fprintf(os.Stderr, "bench/xds: %s profile: %v\n", profile, err)
	}
}

// cpu starts a CPU profile (or, with the name "trace", an execution
// trace) of d plus a second and returns a function that waits for it to be
// written.
func (p *profiler) cpu(file string, d time.Duration) (wait func()) {
	if p.url == "" {
		return func() {}
	}
	done := make(chan struct{})
	secs := int((d + time.Second).Seconds())
	kind := "profile"
	if p.trace {
		kind = "trace"
	}
	go func() {
		defer close(done)
		if err := p.fetch(file, fmt.Sprintf("%s/%s?seconds=%d", p.url, kind, secs)); err != nil {
			fmt.Fprintf(os.Stderr, "bench/xds: %s: %v\n", kind, err)
		}
	}()
	time.Sleep(50 * time.Millisecond) // let the profile start before the change
	return func() { <-done }
}

func (p *profiler) fetch(file, url string) error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	path := filepath.Join(p.dir, p.prefix+"-"+file+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "bench/xds: wrote %s\n", path)
	return f.Close()
}
