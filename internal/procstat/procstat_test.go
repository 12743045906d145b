package procstat

import (
	"os"
	"slices"
	"strconv"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		stat string
		min  int
		want []string // nil: an error
	}{
		{"12 (sh) S 1 12 12", 4, []string{"S", "1", "12", "12"}},
		{"12 (a b) c)) R 1 2\n", 3, []string{"R", "1", "2"}},
		{"12 (x) S 1", 3, nil},
		{"12 x S 1 2", 1, nil},
		{"12 (x)", 0, []string{}},
		{") S 1", 2, []string{"S", "1"}}, // the name's last ')' at offset 0
	} {
		got, err := parse(12, c.stat, c.min)
		if c.want == nil {
			if err == nil {
				t.Errorf("parse(%q, %d) = %q, want an error", c.stat, c.min, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parse(%q, %d) = %q, %v, want %q", c.stat, c.min, got, err, c.want)
		}
	}
}

func TestFieldsSelf(t *testing.T) {
	f, err := Fields(os.Getpid(), 20)
	if err != nil {
		t.Fatal(err)
	}
	if f[0] != "R" && f[0] != "S" { // field 3, state: this process runs
		t.Errorf("state %q, want R or S", f[0])
	}
	if f[1] != strconv.Itoa(os.Getppid()) { // field 4, ppid
		t.Errorf("ppid field %q, want %d", f[1], os.Getppid())
	}
	if _, err := Fields(-1, 0); err == nil {
		t.Error("Fields(-1) = nil error")
	}
}
