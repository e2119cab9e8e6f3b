package ctl

import (
	"strings"
	"testing"
)

// Tokens never go over plaintext to another host unless the operator says
// so, and then a read never falls back to the write token. Nothing here
// dials: the refusal comes before any connection.
func TestTokensStayOffPlaintextBeyondLoopback(t *testing.T) {
	env := func(string) string { return "" }
	for addr, loop := range map[string]bool{"127.0.0.1:19000": true, "[::1]:19000": true, "localhost:19000": true, "10.0.0.1:19000": false, "pylon.example:19000": false} {
		a := Flags{Addr: addr, DataDir: t.TempDir(), getenv: env}
		_, _, err := a.Client().http(0)
		if loop && err != nil {
			t.Errorf("%s: loopback refused: %v", addr, err)
		}
		if !loop && (err == nil || !strings.Contains(err.Error(), "--admin-insecure")) {
			t.Errorf("%s: plaintext beyond loopback allowed: %v", addr, err)
		}
		a.Insecure = true
		if _, _, err := a.Client().http(0); err != nil {
			t.Errorf("%s with --admin-insecure: %v", addr, err)
		}
		sources := a.Client().readSources()
		fallsBack := false
		for _, s := range sources {
			fallsBack = fallsBack || strings.HasSuffix(s.where, "admin-token") || s.where == "$"+envToken
		}
		if fallsBack == !loop {
			t.Errorf("%s: reads fall back to the write token: %v (want %v)", addr, fallsBack, loop)
		}
	}
}
