package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// HostPrograms are the programs `strait-agent iptables` runs
// (internal/iptables: the save/restore pairs of both backends and both
// families, and ip for the TPROXY routes), looked up on the build machine.
var HostPrograms = []string{
	"iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore",
	"iptables-legacy-save", "iptables-legacy-restore", "ip6tables-legacy-save", "ip6tables-legacy-restore",
	"iptables-nft-save", "iptables-nft-restore", "ip6tables-nft-save", "ip6tables-nft-restore",
	"ip",
}

// XtablesDir is where Debian's iptables loads its match and target
// extensions from (dlopen, so ldd does not list them).
const XtablesDir = "/usr/lib/x86_64-linux-gnu/xtables"

// HostOptions configure HostFiles.
type HostOptions struct {
	// Programs are looked up in PATH (plus /usr/sbin and /sbin); each
	// becomes /usr/sbin/NAME in the image.
	Programs []string
	// ExtraDirs are copied whole (their shared objects' libraries too),
	// at the same path.
	ExtraDirs []string
	// Ldd runs ldd on a file; nil runs the system's.
	Ldd func(ctx context.Context, file string) ([]byte, error)
}

// HostFiles returns the image files that make opts.Programs run: each
// program's real file (symlinks such as iptables-restore →
// xtables-nft-multi are kept as links, since the multi-call binaries
// dispatch on their name), every shared library ldd lists for it and for
// the files of ExtraDirs, and the dynamic loader. The error names a
// program that is missing and the Debian package that has it.
func HostFiles(ctx context.Context, opts HostOptions) ([]File, error) {
	ldd := opts.Ldd
	if ldd == nil {
		ldd = func(ctx context.Context, file string) ([]byte, error) {
			return exec.CommandContext(ctx, "ldd", file).Output()
		}
	}
	var files []File
	seen := map[string]bool{}
	add := func(f File) {
		if !seen[f.Path] {
			seen[f.Path] = true
			files = append(files, f)
		}
	}
	var objects []string // real files whose libraries are needed
	for _, name := range opts.Programs {
		p, err := lookPath(name)
		if err != nil {
			return nil, fmt.Errorf("program %s for the proxy image: not found on this machine (install Debian's iptables and iproute2 packages: scripts/install-deps.sh)", name)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("program %s: %w", name, err)
		}
		target := "/usr/sbin/" + filepath.Base(real)
		add(File{Path: target, Src: real})
		if filepath.Base(real) != name {
			add(File{Path: "/usr/sbin/" + name, Link: filepath.Base(real)})
		}
		objects = append(objects, real)
	}
	for _, dir := range opts.ExtraDirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("directory %s for the proxy image: %w", dir, err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if e.Type()&os.ModeSymlink != 0 {
				link, err := os.Readlink(p)
				if err != nil {
					return nil, fmt.Errorf("directory %s for the proxy image: %w", dir, err)
				}
				add(File{Path: p, Link: link})
				continue
			}
			if !e.Type().IsRegular() {
				continue
			}
			add(File{Path: p, Src: p})
			objects = append(objects, p)
		}
	}
	for _, obj := range objects {
		out, err := ldd(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", obj, err)
		}
		for _, lib := range parseLdd(out) {
			real, err := filepath.EvalSymlinks(lib)
			if err != nil {
				return nil, fmt.Errorf("library %s of %s: %w", lib, obj, err)
			}
			add(File{Path: lib, Src: real})
		}
	}
	return files, nil
}

// parseLdd returns the absolute paths in ldd's output: "libc.so.6 =>
// /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader's
// "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vDSO has no file.
func parseLdd(out []byte) []string {
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		f := strings.Fields(line)
		if len(f) > 0 && filepath.IsAbs(f[0]) {
			libs = append(libs, f[0])
		}
	}
	return libs
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}
