package http1

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestStaleConn(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no response", ErrNoResponse, true},
		{"no response, wrapped", fmt.Errorf("exchange: %w", ErrNoResponse), true},
		{"EOF", io.EOF, true},
		{"EOF, wrapped", fmt.Errorf("reading the head: %w", io.EOF), true},
		{"reset", reset, true},
		{"broken pipe", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, true},
		{"timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false},
		{"other", errors.New("malformed response"), false},
		{"nil", nil, false},
	} {
		if got := StaleConn(tc.err); got != tc.want {
			t.Errorf("%s: StaleConn(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestIdempotent(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"} {
		if !Idempotent(m) {
			t.Errorf("Idempotent(%s) = false", m)
		}
	}
	for _, m := range []string{"POST", "PATCH", "CONNECT", "get", ""} {
		if Idempotent(m) {
			t.Errorf("Idempotent(%q) = true", m)
		}
	}
}
