package loopback

import "testing"

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		":18000":           false, // every interface
		"0.0.0.0:18000":    false,
		"[::]:18000":       false,
		"10.1.2.3:18000":   false,
		"pylon.internal:1": false,
		"[fe80::1%lo]:1":   false,
		"localhost:19000":  true,
		"LocalHost:19000":  true,
		"127.0.0.1:19000":  true,
		"127.8.9.10:1":     true,
		"[::1]:19000":      true,
		"no-port":          false,
	} {
		if got := Is(addr); got != want {
			t.Errorf("Is(%q) = %v, want %v", addr, got, want)
		}
	}
}
