package snapshot_test

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// A name in canonical form, what grpc-go and Envoy send, costs no
// allocation; one out of order is sorted by key.
func TestCanonicalXdstpAllocations(t *testing.T) {
	sorted := "xdstp://pylon.example/envoy.config.cluster.v3.Cluster/greeter?a=1&b=2&c=3"
	if n := testing.AllocsPerRun(100, func() { _ = snapshot.CanonicalXdstp(sorted) }); n != 0 {
		t.Errorf("a sorted name: %v allocations, want 0", n)
	}
	if got := snapshot.CanonicalXdstp("xdstp://a/t/n?c=3&a=1&b=2#d"); got != "xdstp://a/t/n?a=1&b=2&c=3#d" {
		t.Errorf("unsorted: %q", got)
	}
	if got := snapshot.CanonicalXdstp(sorted); got != sorted {
		t.Errorf("sorted: %q", got)
	}
}
