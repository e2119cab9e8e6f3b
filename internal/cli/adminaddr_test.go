package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// --admin-addr takes HOST:PORT, or a URL's scheme and host: http:// is the
// plaintext API (so its loopback rule), https:// the API over TLS
// (verified with --admin-ca-file, else the system's roots). Anything else
// is refused saying what the flag takes, not called "not loopback".
func TestAdminAddrTakesAScheme(t *testing.T) {
	env := func(string) string { return "" }
	for addr, want := range map[string]string{
		"127.0.0.1:19000":         "http://127.0.0.1:19000",
		"http://127.0.0.1:19000":  "http://127.0.0.1:19000",
		"http://[::1]:19000/":     "http://[::1]:19000",
		"https://127.0.0.1:19000": "https://127.0.0.1:19000",
		"https://10.0.0.1:19000":  "https://10.0.0.1:19000",
		"HTTPS://localhost:19000": "https://localhost:19000",
	} {
		a := adminFlags{addr: addr, dataDir: t.TempDir(), getenv: env}
		_, base, err := a.client().http(0)
		if err != nil || base != want {
			t.Errorf("--admin-addr %s: %q, %v; want %s", addr, base, err, want)
		}
	}
	for addr, says := range map[string]string{
		"http://10.0.0.1:19000":        "is not loopback",
		"https://127.0.0.1":            "takes HOST:PORT",
		"127.0.0.1":                    "takes HOST:PORT",
		"ftp://127.0.0.1:19000":        "takes HOST:PORT",
		"https://127.0.0.1:19000/v1":   "takes HOST:PORT",
		"https://u:p@127.0.0.1:19000":  "takes HOST:PORT",
		"https://127.0.0.1:19000?x=1":  "takes HOST:PORT",
		"https://127.0.0.1:19000/#top": "takes HOST:PORT",
	} {
		a := adminFlags{addr: addr, dataDir: t.TempDir(), getenv: env}
		if _, _, err := a.client().http(0); err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "u:p") {
			t.Errorf("--admin-addr %s: %v; want an error saying %q", addr, err, says)
		}
	}
	a := adminFlags{addr: "http://127.0.0.1:19000", caFile: "ca.pem", dataDir: t.TempDir(), getenv: env}
	if _, _, err := a.client().http(0); err == nil || !strings.Contains(err.Error(), "--admin-ca-file") {
		t.Errorf("http:// with --admin-ca-file: %v", err)
	}
}

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
