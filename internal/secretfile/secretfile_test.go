package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fixture is a secret directory with a certificate, a folder outside it
// with a file an attacker wants, and Pylon's data folder with a token.
type fixture struct {
	certs, outside, data string
	r                    *Reader
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{certs: filepath.Join(root, "certs"), outside: filepath.Join(root, "etc"), data: filepath.Join(root, "data")}
	for _, d := range []string{f.certs, filepath.Join(f.certs, "sub"), f.outside, f.data} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(f.certs, "api.crt"), "CERT")
	write(t, filepath.Join(f.certs, "sub", "api.key"), "KEY")
	write(t, filepath.Join(f.outside, "passwd"), "root:x:0:0")
	write(t, filepath.Join(f.data, "admin.token"), "TOKEN")
	r, err := New([]string{f.certs}, []string{f.data})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestReadsInsideSecretDirs(t *testing.T) {
	f := newFixture(t)
	symlink(t, "sub/api.key", filepath.Join(f.certs, "key-link")) // stays inside
	for _, p := range []string{
		filepath.Join(f.certs, "api.crt"),
		"api.crt",     // relative: to the first secret directory
		"sub/api.key", // below it
		filepath.Join(f.certs, "key-link"),
	} {
		if data, err := f.r.Read(p); err != nil || len(data) == 0 {
			t.Errorf("Read(%s) = %q, %v", p, data, err)
		}
	}
}

// Each refusal is an *Error naming the path and why, and never the
// contents of the file it refused.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	symlink(t, filepath.Join(f.outside, "passwd"), filepath.Join(f.certs, "passwd-link"))
	symlink(t, f.outside, filepath.Join(f.certs, "etc-link"))
	if err := syscall.Mkfifo(filepath.Join(f.certs, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(f.certs, "big.pem")
	write(t, big, strings.Repeat("x", MaxBytes+1))
	cases := []struct{ path, want string }{
		{filepath.Join(f.outside, "passwd"), "is outside the secret directories (" + f.certs + "); allow it with --secret-dir"},
		{"/etc/passwd", "is outside the secret directories"},
		{f.certs + "/../etc/passwd", `contains ".."`},
		{"sub/../api.crt", `contains ".."`}, // even one that stays inside: say what you mean
		{"../etc/passwd", `contains ".."`},
		{filepath.Join(f.certs, "passwd-link"), "leaves the secret directories through a symlink"},
		{"etc-link/passwd", "leaves the secret directories through a symlink"},
		{"/proc/self/environ", "is under /proc"},
		{"/sys/kernel/notes", "is under /sys"},
		{"/dev/zero", "is under /dev"},
		{filepath.Join(f.data, "admin.token"), "is under " + f.data + ", which Pylon never reads secrets from"},
		{filepath.Join(f.certs, "fifo"), "is not a regular file"},
		{"sub", "is not a regular file"},
		{big, "is larger than 1048576 bytes"},
	}
	for _, c := range cases {
		data, err := f.r.Read(c.path)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.path+" ") {
			t.Errorf("Read(%s) = %q, %v; want an *Error naming the path: %s", c.path, data, err, c.want)
		}
		for _, secret := range []string{"root:x", "TOKEN"} {
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("Read(%s): the error shows the file's contents: %v", c.path, err)
			}
		}
	}
}

// A secret directory that holds Pylon's data folder still cannot reach the
// token, by its path or through a symlink inside the directory.
func TestDataFolderInsideSecretDir(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(data, "admin.token"), "TOKEN")
	symlink(t, "data/admin.token", filepath.Join(root, "token.pem"))
	r, err := New([]string{root}, []string{data})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(data, "admin.token"), "data/admin.token", "token.pem"} {
		if _, err := r.Read(p); err == nil || !strings.Contains(err.Error(), "under "+data) {
			t.Errorf("Read(%s): %v, want a refusal naming the data folder", p, err)
		}
	}
	if _, err := New([]string{data}, []string{data}); err == nil {
		t.Error("a secret directory inside the data folder was accepted")
	}
	if _, err := New([]string{"/proc/self"}, nil); err == nil {
		t.Error("a secret directory under /proc was accepted")
	}
}

// The file system's root is refused as a secret directory, named as "/" or
// through a symlink to it, with an error naming the flag.
func TestRootSecretDirRefused(t *testing.T) {
	link := filepath.Join(t.TempDir(), "everything")
	symlink(t, "/", link)
	for _, d := range []string{"/", "/.", "/tmp/..", link} {
		_, err := New([]string{d}, nil)
		if err == nil || !strings.Contains(err.Error(), "file system's root") || !strings.Contains(err.Error(), "--secret-dir") {
			t.Errorf("New(%s): %v, want a refusal of the root naming --secret-dir", d, err)
		}
	}
}

func TestNoSecretDirs(t *testing.T) {
	r, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read("/etc/hostname"); err == nil || !strings.Contains(err.Error(), "no secret directories are configured") {
		t.Errorf("read without secret directories: %v", err)
	}
}

// A secret directory named through a symlink (Kubernetes mounts secrets
// through ..data links) contains the files named through its real path,
// and the other way round.
func TestSecretDirThroughSymlink(t *testing.T) {
	f := newFixture(t)
	link := filepath.Join(t.TempDir(), "certs-link")
	symlink(t, f.certs, link)
	r, err := New([]string{link}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(link, "api.crt"), filepath.Join(f.certs, "api.crt")} {
		if _, err := r.Read(p); err != nil {
			t.Errorf("Read(%s): %v", p, err)
		}
	}
}

func TestMissingFileNamesPathOnly(t *testing.T) {
	f := newFixture(t)
	_, err := f.r.Read("nope.crt")
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.crt") {
		t.Errorf("missing file: %v", err)
	}
}
