// Package secretfile reads the certificate, key and CA files a config names,
// and only those: paths resolve under the configured secret directories,
// through os.Root, so that `..`, a symlink that leaves a directory, the
// kernel's pseudo-filesystems and Pylon's own data folder (its admin token
// files live there) are refused. A config that can name any file would make
// Pylon serve /etc/shadow or /proc/self/environ over SDS to any proxy.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxBytes bounds one certificate, key or CA file; a real one is a few KiB.
const MaxBytes = 1 << 20

// systemDenied are never read, whatever the secret directories: they are
// not files but views of processes, the kernel and devices.
var systemDenied = []string{"/proc", "/sys", "/dev"}

// Error is a refusal to read a path. Its message names the path and the
// reason, never anything read from the file.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string { return e.Path + " " + e.Reason }

// Reader reads secret files confined to directories. It holds no open
// files: each Read opens its directory as an os.Root and closes it.
type Reader struct {
	dirs []string
	deny []string
}

// New returns a reader confined to dirs, which never reads under deny
// (Pylon's data folder) or /proc, /sys and /dev. Relative dirs are made
// absolute against the working directory now. Without dirs, every read is
// refused. A secret directory under a denied folder is an error.
func New(dirs, deny []string) (*Reader, error) {
	r := &Reader{}
	for _, d := range deny {
		if d == "" {
			continue
		}
		abs, err := canonical(d)
		if err != nil {
			return nil, fmt.Errorf("denied folder %s: %w", d, err)
		}
		r.deny = append(r.deny, abs)
	}
	r.deny = append(r.deny, systemDenied...)
	for _, d := range dirs {
		abs, err := canonical(d)
		if err != nil {
			return nil, fmt.Errorf("secret directory %s: %w", d, err)
		}
		if isRoot(abs) {
			// Every file on the host is never what an operator means,
			// and it would let whoever writes config serve any of them.
			return nil, fmt.Errorf("secret directory %s is the file system's root, from which any file on the host could be served; name the folders holding certificates and keys instead (repeat --secret-dir for each)", d)
		}
		if fi, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("secret directory %s: %w", d, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("secret directory %s: not a directory", d)
		}
		if den := r.denied(abs); den != "" {
			return nil, fmt.Errorf("secret directory %s is under %s, which Pylon never reads secrets from", d, den)
		}
		if !slices.Contains(r.dirs, abs) {
			r.dirs = append(r.dirs, abs)
		}
	}
	return r, nil
}

// canonical is the absolute path of p with symlinks resolved when it
// exists, so that a directory named through a symlink still contains the
// files named through its real path.
func canonical(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil
}

// isRoot reports whether the canonical path p is a file system root
// ("/", or a volume root such as C:\ elsewhere).
func isRoot(p string) bool { return filepath.Dir(p) == p }

// Dirs returns the secret directories, absolute, in order.
func (r *Reader) Dirs() []string { return slices.Clone(r.dirs) }

// Read reads the file at p, which must lie under a secret directory; a
// relative p is relative to the first one. It returns an *Error for a path
// outside them, and the file system's error (naming the path only) when the
// file cannot be read.
func (r *Reader) Read(p string) ([]byte, error) {
	if slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
		return nil, &Error{Path: p, Reason: "contains \"..\"; name the file by its path under a secret directory"}
	}
	if len(r.dirs) == 0 {
		return nil, &Error{Path: p, Reason: "cannot be read: no secret directories are configured; allow one with --secret-dir"}
	}
	full := filepath.Clean(p)
	if !filepath.IsAbs(full) {
		full = filepath.Join(r.dirs[0], full)
	}
	if den := r.denied(full); den != "" {
		return nil, &Error{Path: p, Reason: fmt.Sprintf("is under %s, which Pylon never reads secrets from", den)}
	}
	dir, rel := r.within(full)
	if dir == "" {
		// The lexical path may go through a symlink to a secret directory
		// (/etc/certs -> /srv/certs): judge where it really points.
		if real, err := filepath.EvalSymlinks(full); err == nil {
			full = real
			dir, rel = r.within(full)
		}
	}
	if dir == "" {
		return nil, r.outside(p)
	}
	// A symlink inside a directory may point elsewhere in it: check where it
	// ends, so that a secret directory that holds the data folder cannot be
	// used to reach it. (os.Root below refuses anything leaving the root.)
	if real, err := filepath.EvalSymlinks(full); err == nil {
		if den := r.denied(real); den != "" {
			return nil, &Error{Path: p, Reason: fmt.Sprintf("resolves under %s, which Pylon never reads secrets from", den)}
		}
	}
	return readIn(dir, rel, p, r)
}

// readIn opens rel under dir through os.Root and reads at most MaxBytes.
func readIn(dir, rel, p string, r *Reader) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Non-blocking, so that a FIFO planted in a secret directory cannot hold
	// the reconcile loop in open(2); it is then refused as not regular.
	f, err := root.OpenFile(rel, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
			return nil, &Error{Path: p, Reason: fmt.Sprintf("leaves the secret directories through a symlink (%s)", r.list())}
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: unwrap(err)}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: unwrap(err)}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Path: p, Reason: "is not a regular file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: unwrap(err)}
	}
	if len(data) > MaxBytes {
		return nil, &Error{Path: p, Reason: fmt.Sprintf("is larger than %d bytes", MaxBytes)}
	}
	return data, nil
}

func unwrap(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// within returns the secret directory holding full and full relative to it.
func (r *Reader) within(full string) (dir, rel string) {
	for _, d := range r.dirs {
		if rel, ok := under(d, full); ok {
			return d, rel
		}
	}
	return "", ""
}

// denied returns the denied folder holding p, or "".
func (r *Reader) denied(p string) string {
	for _, d := range r.deny {
		if _, ok := under(d, p); ok {
			return d
		}
	}
	return ""
}

// under reports whether p is dir or lies below it, lexically, and p
// relative to dir.
func under(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

func (r *Reader) outside(p string) error {
	return &Error{Path: p, Reason: fmt.Sprintf("is outside the secret directories (%s); allow it with --secret-dir", r.list())}
}

func (r *Reader) list() string { return strings.Join(r.dirs, ", ") }
