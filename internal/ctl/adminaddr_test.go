package ctl

import (
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
		a := Flags{Addr: addr, DataDir: t.TempDir(), getenv: env}
		_, base, err := a.Client().http(0)
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
		a := Flags{Addr: addr, DataDir: t.TempDir(), getenv: env}
		if _, _, err := a.Client().http(0); err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "u:p") {
			t.Errorf("--admin-addr %s: %v; want an error saying %q", addr, err, says)
		}
	}
	a := Flags{Addr: "http://127.0.0.1:19000", CAFile: "ca.pem", DataDir: t.TempDir(), getenv: env}
	if _, _, err := a.Client().http(0); err == nil || !strings.Contains(err.Error(), "--admin-ca-file") {
		t.Errorf("http:// with --admin-ca-file: %v", err)
	}
}
