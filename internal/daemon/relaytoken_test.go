package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/token"
)

// TestRelayTokenFileIsPrivateAndItsOwn: --relay-token-file is refused when
// others can read it, when it is short, or when it holds an admin token
// (the read token would then post reports again); a good one is read.
func TestRelayTokenFileIsPrivateAndItsOwn(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	w, r := write("admin-token", "write-token-0123456789abcdef", 0o600), write("read-token", "read-token-0123456789abcdef", 0o600)
	tokens, err := token.LoadFiles(token.FilesOptions{WriteFile: w, ReadFile: r})
	if err != nil {
		t.Fatal(err)
	}
	for file, says := range map[string]string{
		write("open", "relay-token-0123456789abcdef", 0o644):  "chmod 600",
		write("short", "short", 0o600):                        "at least 16",
		write("same", "read-token-0123456789abcdef\n", 0o600): "of their own",
	} {
		if _, err := relayToken(file, tokens); err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "0123456789") {
			t.Errorf("relayToken(%s): %v, want an error saying %q and not the token", filepath.Base(file), err, says)
		}
	}
	if got, err := relayToken(write("good", "relay-token-0123456789abcdef\n", 0o600), tokens); err != nil || got != "relay-token-0123456789abcdef" {
		t.Errorf("a good relay token file: %q, %v", got, err)
	}
}
