package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostFiles: programs keep their link names, their real files and
// every library ldd lists land at ldd's paths, and the extra directory's
// files and links are copied with their libraries.
func TestHostFiles(t *testing.T) {
	bin, lib, ext := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(p, content string) {
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "xtables-fake-multi"), "multi")
	if err := os.Symlink("xtables-fake-multi", filepath.Join(bin, "fake-restore")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(bin, "fakeip"), "ip")
	write(filepath.Join(lib, "libx.so.1.0"), "libx")
	if err := os.Symlink("libx.so.1.0", filepath.Join(lib, "libx.so.1")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(lib, "libext.so"), "libext")
	write(filepath.Join(ext, "libxt_REDIRECT.so"), "redirect")
	if err := os.Symlink("libxt_REDIRECT.so", filepath.Join(ext, "libxt_ALIAS.so")); err != nil {
		t.Fatal(err)
	}
	// A subdirectory (sorted first) is skipped, not the end of the list.
	if err := os.Mkdir(filepath.Join(ext, "aaa"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)

	var asked []string
	ldd := func(_ context.Context, file string) ([]byte, error) {
		asked = append(asked, filepath.Base(file))
		switch filepath.Base(file) {
		case "xtables-fake-multi", "fakeip":
			return []byte("\tlinux-vdso.so.1 (0x1)\n\tlibx.so.1 => " + filepath.Join(lib, "libx.so.1") + " (0x1)\n"), nil
		case "libxt_REDIRECT.so":
			return []byte("\tlibext.so => " + filepath.Join(lib, "libext.so") + " (0x1)\n"), nil
		}
		return nil, errors.New("unexpected ldd " + file)
	}
	files, err := HostFiles(context.Background(), HostOptions{Programs: []string{"fake-restore", "fakeip"}, ExtraDirs: []string{ext}, Ldd: ldd})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range files {
		if _, dup := got[f.Path]; dup {
			t.Errorf("%s listed twice", f.Path)
		}
		got[f.Path] = f
	}
	want := map[string]File{
		"/usr/sbin/xtables-fake-multi":          {Path: "/usr/sbin/xtables-fake-multi", Src: filepath.Join(bin, "xtables-fake-multi")},
		"/usr/sbin/fake-restore":                {Path: "/usr/sbin/fake-restore", Link: "xtables-fake-multi"},
		"/usr/sbin/fakeip":                      {Path: "/usr/sbin/fakeip", Src: filepath.Join(bin, "fakeip")},
		filepath.Join(lib, "libx.so.1"):         {Path: filepath.Join(lib, "libx.so.1"), Src: filepath.Join(lib, "libx.so.1.0")},
		filepath.Join(ext, "libxt_REDIRECT.so"): {Path: filepath.Join(ext, "libxt_REDIRECT.so"), Src: filepath.Join(ext, "libxt_REDIRECT.so")},
		filepath.Join(ext, "libxt_ALIAS.so"):    {Path: filepath.Join(ext, "libxt_ALIAS.so"), Link: "libxt_REDIRECT.so"},
		filepath.Join(lib, "libext.so"):         {Path: filepath.Join(lib, "libext.so"), Src: filepath.Join(lib, "libext.so")},
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: got %+v, want %+v", p, got[p], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d files %v, want %d", len(got), got, len(want))
	}
	if strings.Join(asked, ",") != "xtables-fake-multi,fakeip,libxt_REDIRECT.so" {
		t.Errorf("ldd ran on %v, want the real program files and the extension (not links)", asked)
	}

	_, err = HostFiles(context.Background(), HostOptions{Programs: []string{"no-such-program"}, Ldd: ldd})
	if err == nil || !strings.Contains(err.Error(), "no-such-program") || !strings.Contains(err.Error(), "iptables") {
		t.Errorf("missing program: err %v, want it named with the Debian packages", err)
	}
}
