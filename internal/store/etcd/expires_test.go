package etcd

import "testing"

// TestExpiresLeases: the config service learns through this optional
// interface (as configstore declares it) that etcd expires leases itself;
// without it each replica would run its own expiry on shared objects.
func TestExpiresLeases(t *testing.T) {
	var st any = (*Store)(nil)
	le, ok := st.(interface{ ExpiresLeases() bool })
	if !ok || !le.ExpiresLeases() {
		t.Fatalf("*etcd.Store does not report that it expires leases (implements: %v)", ok)
	}
}
