package seal

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadPrivate reads a file that holds a secret (a key file here, the admin
// token files in package token): a regular file that only its owner can
// read or write, never through a link, of at most max bytes. what names
// the file in errors ("token file", Flag), which never show its contents.
func ReadPrivate(path, what string, max int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s %s is not a regular file", what, path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%s %s has mode %v: others can read it; chmod 600 it", what, path, fi.Mode().Perm())
	case fi.Size() > int64(max):
		return nil, fmt.Errorf("%s %s is too large: at most %d bytes", what, path, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s %s is too large: at most %d bytes", what, path, max)
	}
	return b, nil
}
