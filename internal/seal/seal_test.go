package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func keyLine(t *testing.T, name string, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return name + ":" + base64.StdEncoding.EncodeToString(b)
}

func ring(t *testing.T, lines ...string) *Keyring {
	t.Helper()
	r, err := Parse([]byte(strings.Join(lines, "\n")+"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealOpen(t *testing.T) {
	k1, k2 := keyLine(t, "k1", 32), keyLine(t, "k2", 32)
	old := ring(t, k1)
	both := ring(t, "# rotated", k2, "", k1)
	plain := []byte("-----BEGIN PRIVATE KEY----- marker")
	v := old.Seal("secrets/a", plain)
	if bytes.Contains(v, plain) || !strings.HasPrefix(string(v), Prefix+"k1:") {
		t.Fatalf("sealed value %q", v)
	}
	for _, r := range []*Keyring{old, both} {
		got, err := r.Open("secrets/a", v)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("open with %v: %q %v", r.Names(), got, err)
		}
	}
	if both.Current(v) || !old.Current(v) || both.Primary() != "k2" {
		t.Fatal("Current: a value under k1 is current for [k2 k1]")
	}
	// Clear text reads as it is (a store written before the key).
	if got, err := both.Open("secrets/a", plain); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("clear text: %q %v", got, err)
	}
	if both.Current(plain) {
		t.Fatal("clear text is current with a key")
	}
	var none *Keyring
	if got := none.Seal("x", plain); !bytes.Equal(got, plain) || !none.Current(plain) {
		t.Fatal("a nil keyring sealed")
	}
}

func TestOpenErrors(t *testing.T) {
	k1, k2 := keyLine(t, "k1", 32), keyLine(t, "k2", 32)
	r := ring(t, k1)
	v := r.Seal("secrets/a", []byte("body"))
	var none *Keyring
	if _, err := none.Open("secrets/a", v); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), Flag) || !strings.Contains(err.Error(), `"k1"`) {
		t.Errorf("no keyring: %v", err)
	}
	if _, err := ring(t, k2).Open("secrets/a", v); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "lists only k2") {
		t.Errorf("another key: %v", err)
	}
	if _, err := r.Open("secrets/b", v); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "secrets/b") {
		t.Errorf("moved to another record: %v", err)
	}
	for i := len(Prefix) + 3; i < len(v); i++ {
		bad := bytes.Clone(v)
		bad[i] ^= 1
		if _, err := r.Open("secrets/a", bad); !errors.Is(err, ErrDamaged) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := r.Open("secrets/a", v[:len(v)-1]); !errors.Is(err, ErrDamaged) {
		t.Errorf("truncated: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	short := keyLine(t, "short", 31)
	secretPart := strings.SplitN(short, ":", 2)[1]
	for _, c := range []struct{ in, want string }{
		{short, `key "short" is 31 bytes; AES-256 needs 32`},
		{keyLine(t, "k", 33), "33 bytes"},
		{"k1:not base64!", "not base64"},
		{"no-colon", "want name:base64-key"},
		{"bad name:" + strings.SplitN(keyLine(t, "x", 32), ":", 2)[1], "want name:base64-key"},
		{"", "no key"},
		{keyLine(t, "k", 32) + "\n" + keyLine(t, "k", 32), `key "k" listed twice`},
	} {
		_, err := Parse([]byte(c.in), "f")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), secretPart) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}

// TestGenerateCommand: the command the docs give makes a key file Load
// takes; a file others can read, or too large, is refused.
func TestGenerateCommand(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", GenerateCommand)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", GenerateCommand, err, out)
	}
	path := filepath.Join(dir, "pylon.key")
	r, err := Load(path)
	if err != nil || r.Primary() != "k1" {
		t.Fatalf("load: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others can read: %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#\n"), MaxFileBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a key file over the bound: %v", err)
	}
}
