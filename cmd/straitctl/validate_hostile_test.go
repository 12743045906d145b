package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// endless is a standard input that never ends (`straitctl validate -f - <
// /dev/zero`).
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}

// TestValidateHostileInput: an endless or oversized input is one problem
// named by its file, read no further than the limit, and the other files
// are still checked; a misspelt kind or a duplicate key fails validation.
func TestValidateHostileInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(validateVS), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runValidate(endless{}, &out, []string{"-", good}, "")
	if err == nil || err.Error() != "1 problem(s); 1 document(s) valid" {
		t.Errorf("error %v, want 1 problem and 1 valid document", err)
	}
	if want := "-: file is larger than 8 MiB, the most a config file may hold; split its documents into several files\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("output %q, want it to start with %q", out.String(), want)
	}

	// A FIFO in a directory is not read (it would block), as straitd
	// leaves it out.
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runValidate(nil, &out, []string{dir}, ""); err != nil || out.String() != "1 document(s) valid\n" {
		t.Errorf("directory with a FIFO: %v, output %q", err, out.String())
	}

	for _, tc := range []struct{ in, want string }{
		{strings.Replace(validateVS, "kind: VirtualService", "kind: VirtualServices", 1), `-: document 1: kind: "VirtualServices" is not a networking.istio.io kind; did you mean VirtualService?`},
		{validateVS + "metadata: {name: other}\n", `-: document 1: invalid YAML: line 12: key "metadata" already set in map`},
	} {
		out.Reset()
		if err := runValidate(strings.NewReader(tc.in), &out, []string{"-"}, ""); err == nil || !strings.Contains(out.String(), tc.want) {
			t.Errorf("error %v, output %q, want %q", err, out.String(), tc.want)
		}
	}
}
