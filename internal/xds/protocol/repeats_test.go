package protocol

import (
	"fmt"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Repeats is what OnRequest finds of a request's names: true exactly when
// the subscription stays as it is (a relay skips telling its hook then),
// in any order, and never before the watch has started.
func TestRepeatsIsWhatOnRequestFinds(t *testing.T) {
	reg := xdstype.New()
	snap := world(t, reg, 3, 9000, "c0")
	w := NewWatch(reg.Lookup(xdstype.EndpointURL), NewSharing())
	if w.Repeats(nil) || w.Repeats([]string{"c0"}) {
		t.Fatal("a watch not started repeats a subscription")
	}
	w.OnRequest(&discoveryv3.DiscoveryRequest{ResourceNames: []string{"c0", "c1"}}, snap)
	for _, c := range []struct {
		names []string
		want  bool
	}{
		{[]string{"c0", "c1"}, true},
		{[]string{"c1", "c0"}, true},
		{[]string{"c0"}, false},
		{[]string{"c0", "c1", "c2"}, false},
		{[]string{"c0", "c2"}, false},
		{[]string{"c0", "c1", "*"}, false},
		{nil, false},
	} {
		if got := w.Repeats(c.names); got != c.want {
			t.Errorf("Repeats(%q) = %v, want %v", c.names, got, c.want)
		}
		// What OnRequest finds: a copy of the watch asked the same.
		cp := NewWatch(reg.Lookup(xdstype.EndpointURL), NewSharing())
		cp.OnRequest(&discoveryv3.DiscoveryRequest{ResourceNames: []string{"c0", "c1"}}, snap)
		_, changed := cp.subscribe(c.names, false)
		if changed == c.want {
			t.Errorf("OnRequest finds %q changed=%v, Repeats says %v", c.names, changed, c.want)
		}
	}
}

// BenchmarkAnACKsSubscription is the check a relay's SotW stream makes
// of every ACK of 100 EDS names: Repeats against the set-and-sort it
// replaced (asked.go's askedNames and comparison, copied here as it was).
func BenchmarkAnACKsSubscription(b *testing.B) {
	reg := xdstype.New()
	w := NewWatch(reg.Lookup(xdstype.EndpointURL), NewSharing())
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("outbound|8080||service-%03d.namespace.svc.cluster.local", i))
	}
	w.Started = true
	w.subscribe(names, true)
	b.Run("set-and-sort", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			set := make(map[string]struct{}, len(names))
			for _, n := range names {
				set[n] = struct{}{}
			}
			sorted := make([]string, 0, len(set))
			for n := range set {
				sorted = append(sorted, n)
			}
			slices.Sort(sorted)
			if !slices.Equal(w.Sub.SortedNames(), sorted) {
				b.Fatal("differs")
			}
		}
	})
	b.Run("repeats", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !w.Repeats(names) {
				b.Fatal("differs")
			}
		}
	})
}
