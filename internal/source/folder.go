package source

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pylon-xds/pylon/internal/config"
)

// MaxFiles bounds the config files of a folder: every file is read on
// every change, and a folder of a hundred thousand files is a mistake.
const MaxFiles = 1000

// IsConfigName reports whether a file named n is a config file: *.yaml,
// *.yml or *.json.
func IsConfigName(n string) bool {
	switch strings.ToLower(filepath.Ext(n)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// ReadFolder reads the config files of the folder fsys is rooted at: its
// *.yaml, *.yml and *.json files (not in subfolders, not hidden), in name
// order, at most MaxFiles of them and config.MaxTotalBytes together. It is
// the one way a folder becomes config, on disk (os.DirFS) or at a Git
// commit. where names the folder in the files' paths and errors; dir is
// every file's Dir (see config.File).
func ReadFolder(fsys fs.FS, where, dir string) ([]config.File, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !IsConfigName(n) {
			continue
		}
		// Follow symlinks (Kubernetes mounts ConfigMaps through them) but
		// skip folders.
		if st, err := fs.Stat(fsys, n); err != nil || st.IsDir() {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files", where)
	}
	if len(names) > MaxFiles {
		return nil, fmt.Errorf("%s: %d config files, over the limit of %d", where, len(names), MaxFiles)
	}
	files := make([]config.File, 0, len(names))
	total := 0
	for _, n := range names {
		path := filepath.Join(where, n)
		data, err := readAtMost(fsys, n, config.MaxFileBytes+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// Stop reading once the folder is over the limit, rather than
		// holding every file in memory to say so.
		if total += len(data); total > config.MaxTotalBytes {
			return nil, fmt.Errorf("%s: the config files hold more than %d MiB together, over the limit", where, config.MaxTotalBytes>>20)
		}
		files = append(files, config.File{Path: path, Data: data, Dir: dir})
	}
	return files, nil
}

// readAtMost reads up to limit bytes of name: one byte past the file limit,
// so that config.Load can report the size.
func readAtMost(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAtMost(f, int(limit))
}

// ReadAtMost reads f, up to limit bytes, into one buffer of f's size (a
// resync re-reads a large file: io.ReadAll's doubling allocated two to
// three times its size); a file that grows while it is read is read on
// into a larger one.
func ReadAtMost(f fs.File, limit int) ([]byte, error) {
	size := 512
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = int(min(fi.Size(), int64(limit))) + 1 // + 1: EOF is seen without growing
	}
	data := make([]byte, 0, min(size, limit))
	for len(data) < limit {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(cap(data), limit)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return data, nil
}
