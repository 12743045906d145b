// Command strait-echo is the small application the demo and the end-to-end
// tests run behind the sidecars: it answers every request with a JSON
// document that says which version it is and whom it saw as the client.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Reply is what strait-echo answers to every request.
type Reply struct {
	Version string            `json:"version"`
	Pod     string            `json:"pod,omitempty"`
	Remote  string            `json:"remote"`
	Host    string            `json:"host"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "strait-echo:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("strait-echo", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "address to listen on")
	version := fs.String("version", "v1", "version string to report")
	pod := fs.String("pod", os.Getenv("POD_NAME"), "pod name to report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: handler(*version, *pod), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	slog.Info("serving", "component", "echo", "addr", ln.Addr().String(), "version", *version)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func handler(version, pod string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := Reply{Version: version, Pod: pod, Remote: r.RemoteAddr, Host: r.Host, Path: r.URL.Path, Headers: map[string]string{}}
		for k := range r.Header {
			rep.Headers[k] = r.Header.Get(k)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Version", version)
		_ = json.NewEncoder(w).Encode(rep)
	})
}
