package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Against a real serve: http://HOST:PORT reaches it.
func TestAdminAddrWithSchemeReachesServe(t *testing.T) {
	d := startServe(t)
	var out, errb bytes.Buffer
	code := execute(context.Background(), []string{"history", "--admin-addr", "http://" + d.admin + "/", "--data-dir", d.dataDir}, &out, &errb, func(string) string { return "" })
	if code != 0 || !strings.Contains(out.String(), "REVISION") {
		t.Fatalf("history --admin-addr http://%s/: exit %d, %s%s", d.admin, code, out.String(), errb.String())
	}
	code = execute(context.Background(), []string{"serve", "--admin-addr", "https://127.0.0.1:0", "--data-dir", t.TempDir()}, &out, &errb, func(string) string { return "" })
	if code == 0 || !strings.Contains(errb.String(), "--admin-tls-cert") {
		t.Fatalf("serve --admin-addr https:// without --admin-tls-cert: exit %d, %s", code, errb.String())
	}
}

// $PYLON_ADMIN_ADDR is --admin-addr's default; the flag wins over it.
func TestAdminAddrFromEnvironment(t *testing.T) {
	d := startServe(t)
	env := map[string]string{"PYLON_ADMIN_ADDR": "http://" + d.admin, "PYLON_DATA_DIR": d.dataDir}
	var out, errb bytes.Buffer
	if code := execute(context.Background(), []string{"history"}, &out, &errb, func(k string) string { return env[k] }); code != 0 || !strings.Contains(out.String(), "REVISION") {
		t.Fatalf("history with $PYLON_ADMIN_ADDR: exit %d, %s%s", code, out.String(), errb.String())
	}
	env["PYLON_ADMIN_ADDR"] = "127.0.0.1:1" // nothing there
	errb.Reset()
	if code := execute(context.Background(), []string{"history", "--admin-addr", d.admin}, &out, &errb, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("--admin-addr over $PYLON_ADMIN_ADDR: exit %d, %s", code, errb.String())
	}
	out.Reset()
	root := newRoot(&out, &errb, func(k string) string { return env[k] })
	if f := root.PersistentFlags().Lookup("admin-addr"); f.DefValue != "127.0.0.1:1" || !strings.Contains(f.Usage, "$PYLON_ADMIN_ADDR") {
		t.Fatalf("--admin-addr: default %q, usage %q", f.DefValue, f.Usage)
	}
}
