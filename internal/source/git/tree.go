package git

import (
	"io"
	"io/fs"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// treeFS is one folder of a commit as an fs.FS, for source.ReadFolder:
// its regular files and subfolders. Symbolic links and submodules are not
// listed: a link's target is text, and following it could leave the tree.
// Its entries are indexed by name: ReadFolder looks up every entry it
// lists, and a folder may have hundreds of thousands.
type treeFS struct {
	t      *object.Tree
	byName map[string]object.TreeEntry
}

func newTreeFS(t *object.Tree) treeFS {
	f := treeFS{t: t, byName: make(map[string]object.TreeEntry, len(t.Entries))}
	for _, e := range t.Entries {
		if listed(e.Mode) {
			f.byName[e.Name] = e
		}
	}
	return f
}

func (f treeFS) entry(name string) (object.TreeEntry, error) {
	if e, ok := f.byName[name]; ok {
		return e, nil
	}
	return object.TreeEntry{}, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func listed(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Dir
}

// ReadDir lists the folder itself (".") only: the config is not read from
// subfolders.
func (f treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	var out []fs.DirEntry
	for _, e := range f.t.Entries {
		if listed(e.Mode) {
			out = append(out, f.info(e))
		}
	}
	return out, nil
}

func (f treeFS) Stat(name string) (fs.FileInfo, error) {
	e, err := f.entry(name)
	if err != nil {
		return nil, err
	}
	return f.info(e), nil
}

func (f treeFS) Open(name string) (fs.File, error) {
	e, err := f.entry(name)
	if err != nil {
		return nil, err
	}
	if e.Mode == filemode.Dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	file, err := f.t.TreeEntryFile(&e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	r, err := file.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return blob{ReadCloser: r, info: entryInfo{e, file.Size}}, nil
}

func (f treeFS) info(e object.TreeEntry) entryInfo {
	var size int64
	if e.Mode != filemode.Dir {
		if file, err := f.t.TreeEntryFile(&e); err == nil {
			size = file.Size
		}
	}
	return entryInfo{e, size}
}

type blob struct {
	io.ReadCloser
	info entryInfo
}

func (b blob) Stat() (fs.FileInfo, error) { return b.info, nil }

// entryInfo is a tree entry as both fs.FileInfo and fs.DirEntry.
type entryInfo struct {
	e    object.TreeEntry
	size int64
}

func (i entryInfo) Name() string               { return i.e.Name }
func (i entryInfo) Size() int64                { return i.size }
func (i entryInfo) ModTime() time.Time         { return time.Time{} }
func (i entryInfo) IsDir() bool                { return i.e.Mode == filemode.Dir }
func (i entryInfo) Sys() any                   { return nil }
func (i entryInfo) Type() fs.FileMode          { return i.Mode().Type() }
func (i entryInfo) Info() (fs.FileInfo, error) { return i, nil }
func (i entryInfo) Mode() fs.FileMode {
	if i.IsDir() {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
