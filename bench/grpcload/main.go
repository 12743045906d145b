// Command grpcload is a grpc-go unary load generator and the server it
// loads, for bench/http/grpc.sh.
//
//	grpcload -serve 127.0.0.1:9000
//	grpcload -addr 127.0.0.1:8080 -conns 2 -concurrency 16 -duration 10s
//
// The service is internal/proxy/grpctest's Echo (a StringValue returned
// as is, with one header and one trailer metadata entry). The client runs
// -concurrency workers spread over -conns connections, each calling Echo
// back to back for -duration, and prints one line of key=value pairs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/proxy/grpctest"
)

func main() {
	serve := flag.String("serve", "", "run the server on this address instead of the client")
	addr := flag.String("addr", "", "server or proxy address (host:port) to load")
	conns := flag.Int("conns", 2, "HTTP/2 connections")
	concurrency := flag.Int("concurrency", 16, "calls in flight (workers), spread over the connections")
	duration := flag.Duration("duration", 10*time.Second, "how long to send calls")
	size := flag.Int("size", 100, "request message size in bytes")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "grpcload")
	var err error
	if *serve != "" {
		err = runServer(*serve)
	} else {
		err = runClient(*addr, *conns, *concurrency, *duration, *size)
	}
	if err != nil {
		logger.Error("grpcload failed", "error", err)
		os.Exit(1)
	}
}

func runServer(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on -serve %s: %w", addr, err)
	}
	gs := grpc.NewServer()
	grpctest.Register(gs, grpctest.NewServer())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	return gs.Serve(ln)
}

func runClient(addr string, conns, concurrency int, duration time.Duration, size int) error {
	if addr == "" {
		return errors.New("-addr is required (or -serve to run the server)")
	}
	if conns < 1 || concurrency < 1 {
		return fmt.Errorf("-conns %d and -concurrency %d must be at least 1", conns, concurrency)
	}
	clients := make([]grpctest.Client, conns)
	for i := range clients {
		// One ClientConn per connection: each has its own HTTP/2
		// transport. WithNoProxy: a HTTPS_PROXY in the environment must
		// not take the calls elsewhere.
		cc, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithNoProxy())
		if err != nil {
			return fmt.Errorf("client for %s: %w", addr, err)
		}
		defer cc.Close()
		clients[i] = grpctest.Client{CC: cc}
	}
	msg := strings.Repeat("x", size)
	for i, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := c.Echo(ctx, msg, nil, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("first call on connection %d to %s: %w", i, addr, err)
		}
		if got != msg {
			return fmt.Errorf("first call on connection %d to %s: echo returned %d bytes, want %d", i, addr, len(got), len(msg))
		}
	}

	// Calls carry no deadline: with one, the last calls of the run would
	// end in DeadlineExceeded from whichever hop's timer fires first.
	var stop atomic.Bool
	time.AfterFunc(duration, func() { stop.Store(true) })
	ctx := context.Background()
	type result struct {
		lat      []time.Duration
		errs     int
		firstErr error
	}
	results := make([]result, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%conns]
			r := &results[w]
			for !stop.Load() {
				t := time.Now()
				got, err := c.Echo(ctx, msg, nil, nil)
				if err == nil && got != msg {
					err = fmt.Errorf("echo returned %d bytes, want %d", len(got), len(msg))
				}
				if err != nil {
					r.errs++
					if r.firstErr == nil {
						r.firstErr = err
					}
					continue
				}
				r.lat = append(r.lat, time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var lat []time.Duration
	errs := 0
	var firstErr error
	for _, r := range results {
		lat = append(lat, r.lat...)
		errs += r.errs
		if firstErr == nil {
			firstErr = r.firstErr
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	fmt.Printf("requests=%d errors=%d seconds=%.2f rps=%.0f p50_ms=%.3f p99_ms=%.3f\n",
		len(lat), errs, elapsed.Seconds(), float64(len(lat))/elapsed.Seconds(), pct(0.5), pct(0.99))
	if firstErr != nil {
		return fmt.Errorf("%d calls failed, the first with: %w", errs, firstErr)
	}
	return nil
}
