package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of an image's layer.
type File struct {
	// Path is the absolute path in the image.
	Path string
	// Src is the file on the build machine whose content is copied; empty
	// with Link set makes a symbolic link, empty with neither a directory.
	Src string
	// Link is the target of a symbolic link.
	Link string
	// Mode is the permission bits; 0 takes Src's (0755 for a directory).
	Mode os.FileMode
	// UID and GID own the entry.
	UID, GID int
}

// epoch is every entry's modification time, so the same inputs give the
// same layer digest.
var epoch = time.Unix(0, 0).UTC()

// buildLayer writes files as one uncompressed tar, with every parent
// directory, in path order.
func buildLayer(files []File) (v1.Layer, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("image file path %q: want a clean absolute path such as /usr/local/bin/straitd", f.Path)
		}
		if prev, ok := byPath[f.Path]; ok && prev != f {
			return nil, fmt.Errorf("image file path %q given twice with different content (%q and %q)", f.Path, prev.Src+prev.Link, f.Src+f.Link)
		}
		byPath[f.Path] = f
		for dir := path.Dir(f.Path); dir != "/"; dir = path.Dir(dir) {
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = File{Path: dir}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := writeEntry(tw, byPath[p]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

func writeEntry(tw *tar.Writer, f File) error {
	h := &tar.Header{
		Name:    strings.TrimPrefix(f.Path, "/"),
		ModTime: epoch,
		Uid:     f.UID,
		Gid:     f.GID,
		Format:  tar.FormatPAX,
	}
	switch {
	case f.Link != "":
		h.Typeflag = tar.TypeSymlink
		h.Linkname = f.Link
		h.Mode = 0o777
		return tw.WriteHeader(h)
	case f.Src == "":
		h.Typeflag = tar.TypeDir
		h.Name += "/"
		h.Mode = int64(orMode(f.Mode, 0o755).Perm())
		if f.Mode&os.ModeSticky != 0 {
			h.Mode |= 0o1000 // tar's sticky bit (c_ISVTX), for /tmp
		}
		return tw.WriteHeader(h)
	}
	data, err := os.ReadFile(f.Src)
	if err != nil {
		return fmt.Errorf("image file %s: %w", f.Path, err)
	}
	mode := f.Mode
	if mode == 0 {
		st, err := os.Stat(f.Src)
		if err != nil {
			return fmt.Errorf("image file %s: %w", f.Path, err)
		}
		mode = st.Mode().Perm()
	}
	h.Typeflag = tar.TypeReg
	h.Mode = int64(mode.Perm())
	h.Size = int64(len(data))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

func orMode(m, def os.FileMode) os.FileMode {
	if m == 0 {
		return def
	}
	return m
}
