package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A wrong token and a missing one read differently: "the token was
// refused" naming where the CLI took it from, or "no token was sent"
// naming every place it looked; never the token itself.
func TestTokenRefusedOrNotSent(t *testing.T) {
	d := startServe(t)
	t.Chdir(t.TempDir()) // no pylon-data here
	const wrong = "0123456789abcdef-not-the-token"
	wrongFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(wrongFile, []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(env map[string]string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := execute(context.Background(), append(args, "--admin-addr", d.admin), &out, &errb, func(k string) string { return env[k] })
		return code, errb.String()
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"read, wrong env", map[string]string{"PYLON_READ_TOKEN": wrong}, []string{"history"}, []string{"the token was refused", "$PYLON_READ_TOKEN"}},
		{"read, wrong file", nil, []string{"history", "--read-token-file", wrongFile}, []string{"the token was refused", wrongFile}},
		{"read, none", nil, []string{"history"}, []string{"no token was sent", "$PYLON_READ_TOKEN", filepath.Join(mustGetwd(t), "pylon-data", "read-token")}},
		{"write, wrong env", map[string]string{"PYLON_TOKEN": wrong}, []string{"rollback", "1"}, []string{"the token was refused", "$PYLON_TOKEN"}},
		{"write, wrong file", nil, []string{"rollback", "1", "--token-file", wrongFile}, []string{"the token was refused", wrongFile}},
		{"write, none", nil, []string{"rollback", "1"}, []string{"no token was sent", "$PYLON_TOKEN", filepath.Join(mustGetwd(t), "pylon-data", "admin-token")}},
	} {
		code, stderr := cli(c.env, c.args...)
		if code == 0 || strings.Contains(stderr, wrong) {
			t.Errorf("%s: exit %d, %s", c.name, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: the error does not say %q:\n%s", c.name, w, stderr)
			}
		}
		if strings.Contains(stderr, "no token was sent") == strings.Contains(stderr, "the token was refused") {
			t.Errorf("%s: the error says both or neither:\n%s", c.name, stderr)
		}
	}
}
