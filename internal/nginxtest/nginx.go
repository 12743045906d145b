// Package nginxtest runs a real nginx on loopback for tests that compare
// strait-proxy with it.
package nginxtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// Start runs nginx (Debian's nginx-light) on loopback, in the
// foreground, with a generated config in a temporary directory, and stops it
// when t ends. httpBlock is the body of the config's http{} block; every
// "LISTEN" in it is replaced by the loopback address nginx listens on, which
// Start returns once nginx accepts connections. Without nginx, t is
// skipped, or fails under STRAIT_REQUIRE_ALL (scripts/install-deps.sh
// installs it).
func Start(t testing.TB, httpBlock string) string {
	t.Helper()
	bin := testreq.Binary(t, "nginx", "nginx-light", "/usr/sbin/nginx")
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var temps strings.Builder
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&temps, "%s_temp_path %s;\n", k, filepath.Join(dir, k))
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 1024; }
http {
access_log off;
%[2]s
%[3]s
}
`, dir, temps.String(), strings.ReplaceAll(httpBlock, "LISTEN", addr))
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s\n%s", out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
