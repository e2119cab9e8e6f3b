package render

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestWriteReplacesAtomically: a changed file is a new file renamed over
// the old (a new inode: a reader holding the old one reads it whole, and
// Envoy sees a move), an unchanged one is not touched (same inode), a
// file of a vanished resource is removed while files render does not own
// stay, no temporary file is left, a crash's leftover is cleaned, and
// modes are 0600 in a 0700 folder.
func TestWriteReplacesAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "xds")
	first := []File{{"eds-a.yaml", []byte("a1")}, {"eds-b.yaml", []byte("b1")}, {"cds.yaml", []byte("c1")}, {"lds.yaml", []byte("l1")}}
	res, err := Write(dir, first, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 4 || len(res.Unchanged)+len(res.Removed) != 0 {
		t.Fatalf("first write: %+v", res)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder mode %v, %v", fi.Mode(), err)
	}
	for _, f := range first {
		if fi, err := os.Stat(filepath.Join(dir, f.Name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, %v", f.Name, fi.Mode(), err)
		}
	}
	foreign := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(foreign, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, tempPrefix+"123.tmp")
	if err := os.WriteFile(leftover, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	cdsInode, edsInode := inode(t, filepath.Join(dir, "cds.yaml")), inode(t, filepath.Join(dir, "eds-a.yaml"))

	second := []File{{"eds-a.yaml", []byte("a1")}, {"cds.yaml", []byte("c2")}, {"lds.yaml", []byte("l1")}}
	res, err = Write(dir, second, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Written, []string{"cds.yaml"}) || !slices.Equal(res.Unchanged, []string{"eds-a.yaml", "lds.yaml"}) || !slices.Equal(res.Removed, []string{"eds-b.yaml"}) {
		t.Fatalf("second write: %+v", res)
	}
	if inode(t, filepath.Join(dir, "cds.yaml")) == cdsInode {
		t.Error("cds.yaml was rewritten in place, not replaced by a rename")
	}
	if inode(t, filepath.Join(dir, "eds-a.yaml")) != edsInode {
		t.Error("the unchanged eds-a.yaml was rewritten")
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"cds.yaml", "eds-a.yaml", "lds.yaml", "notes.txt"}) {
		t.Fatalf("folder holds %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cds.yaml")); string(b) != "c2" {
		t.Fatalf("cds.yaml holds %q", b)
	}
}

// TestWriteSecretsNeedAPrivateFolder: with secrets, a folder others can
// read is refused and nothing is written.
func TestWriteSecretsNeedAPrivateFolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Write(dir, []File{{"sds-k.yaml", []byte("key")}}, true)
	if err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("got %v", err)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("wrote %v", got)
	}
	if _, err := Write(dir, []File{{"sds-k.yaml", []byte("key")}}, false); err != nil {
		t.Fatalf("without secrets: %v", err)
	}
}

// TestWriteRefusesForeignNames: Write writes only its own file names, so
// a name cannot escape the folder or overwrite a file it does not own.
func TestWriteRefusesForeignNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"../lds.yaml", "notes.txt", "sub/eds-a.yaml", ".lds.yaml"} {
		if _, err := Write(dir, []File{{n, []byte("x")}}, false); err == nil {
			t.Errorf("%q was written", n)
		}
	}
}

// TestWriteReplacesSymlinkNotTarget: a symlink at a file's name is
// replaced, its target left alone.
func TestWriteReplacesSymlinkNotTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "lds.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, []File{{"lds.yaml", []byte("new")}}, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "lds.yaml")); !fi.Mode().IsRegular() {
		t.Fatal("lds.yaml is still a symlink")
	}
}
