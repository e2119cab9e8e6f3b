package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// tempPattern names the temporary files: hidden, so that nothing reading
// the folder's config files takes one, and recognisable, so that one left
// by a crash is removed by the next Write.
const (
	tempPrefix  = ".pylon-render-"
	tempPattern = tempPrefix + "*.tmp"
)

// MaxFiles bounds the files of one render (and the folder entries Write
// looks at): a node receiving more resources than this is not one to feed
// through files.
const MaxFiles = 20000

// Result is what Write did.
type Result struct {
	Written, Unchanged, Removed []string
}

// Write makes dir hold files, in their order: each changed file is
// written to a temporary file in dir and renamed over its name (Envoy
// reloads on a move, never sees a partial file, and a rename replaces a
// symlink rather than following it); a file whose bytes are already there
// is not touched; then the files render owns that are no longer in files
// are removed, last, once nothing points at them. Files are 0600, a
// created dir 0700; with secret material in files, a dir others can read
// is refused.
func Write(dir string, files []File, secrets bool) (Result, error) {
	var res Result
	if len(files) > MaxFiles {
		return res, fmt.Errorf("%d files, over the limit of %d", len(files), MaxFiles)
	}
	if err := prepare(dir, secrets); err != nil {
		return res, err
	}
	keep := map[string]bool{}
	for _, f := range files {
		if !Owned(f.Name) || filepath.Base(f.Name) != f.Name {
			return res, fmt.Errorf("%q: not a file name render writes", f.Name)
		}
		keep[f.Name] = true
		same, err := unchanged(filepath.Join(dir, f.Name), f.Data)
		if err != nil {
			return res, err
		}
		if same {
			res.Unchanged = append(res.Unchanged, f.Name)
			continue
		}
		if err := replace(dir, f); err != nil {
			return res, err
		}
		res.Written = append(res.Written, f.Name)
	}
	entries, err := readDir(dir)
	if err != nil {
		return res, err
	}
	for _, e := range entries {
		name := e.Name()
		if keep[name] || !Owned(name) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, err
		}
		res.Removed = append(res.Removed, name)
	}
	return res, syncDir(dir)
}

// prepare creates dir (0700) if need be, refuses a dir others can read
// when secrets go in it, and removes temporary files a crash left.
func prepare(dir string, secrets bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a folder", dir)
	}
	if secrets && fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s: mode %#o lets other users read the private keys render would write: chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	entries, err := readDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) && strings.HasSuffix(e.Name(), ".tmp") && e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// readDir lists dir, bounded.
func readDir(dir string) ([]fs.DirEntry, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(MaxFiles + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > MaxFiles {
		return nil, fmt.Errorf("%s: more than %d entries: is it the right folder?", dir, MaxFiles)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// unchanged reports whether path is a regular file holding data (read no
// further than one byte past it).
func unchanged(path string, data []byte) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(data)) {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	got, err := io.ReadAll(io.LimitReader(f, int64(len(data))+1))
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, data), nil
}

// replace writes f to a temporary file in dir, flushes it and renames it
// over f's name; the temporary file is removed on any failure.
func replace(dir string, f File) (err error) {
	tmp, err := os.CreateTemp(dir, tempPattern) // 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(f.Data); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, f.Name))
}

// syncDir flushes the folder's entries, so the renames survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}
