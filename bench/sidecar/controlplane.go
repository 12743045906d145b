package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/netns"
)

// controlPlane is a straitd in file mode serving one mesh.
type controlPlane struct {
	xdsAddr string
	cmd     *exec.Cmd
	done    chan struct{}
}

func (c *controlPlane) stop() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

func startControlPlane(ctx context.Context, o options, network *netns.Network, pod *netns.Pod, dir string, scope int) (*controlPlane, error) {
	configDir := filepath.Join(dir, "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return nil, err
	}
	m := &mesh{dir: configDir, services: o.services, endpoints: o.endpoints, scope: scope, podIP: pod.IP.String()}
	if err := m.write(); err != nil {
		return nil, err
	}
	xdsPort, err := freePort(network.HostIP.String())
	if err != nil {
		return nil, err
	}
	monPort, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	xdsAddr := net.JoinHostPort(network.HostIP.String(), strconv.Itoa(xdsPort))
	monAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(monPort))
	cmd := exec.Command(o.straitd, "--config-dir", configDir, "--xds-addr", xdsAddr, "--monitoring-addr", monAddr,
		"--secure-xds-addr", "", "--ca-dir", filepath.Join(dir, "ca"), "--cacerts-dir", "", "--log-level", "warn")
	if o.verbose {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start straitd: %w", err)
	}
	cp := &controlPlane{xdsAddr: xdsAddr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(cp.done) }()
	// straitd is ready once it has read the config directory.
	err = waitFor(ctx, 60*time.Second, cp.done, func() error {
		resp, err := http.Get("http://" + monAddr + "/healthz/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("straitd /healthz/ready: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		cp.stop()
		return nil, fmt.Errorf("straitd: %w", err)
	}
	return cp, nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls check every 5 ms until it returns nil, exited is closed,
// ctx is done or d has passed.
func waitFor(ctx context.Context, d time.Duration, exited <-chan struct{}, check func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
