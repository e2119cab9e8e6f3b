package protocol

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// InFlight counts as a map would, whatever the order of adds and subs and
// whichever name takes the inline place: checked against a map over random
// sequences of a few names, clones included.
func TestInFlightCountsAsAMap(t *testing.T) {
	names := []string{"a", "b", "c"}
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		var f InFlight
		want := map[string]int{}
		for step := range 40 {
			n := names[r.IntN(len(names))]
			if r.IntN(2) == 0 {
				f.add(n)
				want[n]++
			} else {
				f.sub(n)
				if want[n]--; want[n] <= 0 {
					delete(want, n)
				}
			}
			c := f.Clone()
			for _, m := range names {
				if f.count(m) != want[m] || c.count(m) != want[m] {
					t.Fatalf("run %d step %d: count(%s) = %d (clone %d), want %d", run, step, m, f.count(m), c.count(m), want[m])
				}
			}
			if f.empty() != (len(want) == 0) {
				t.Fatalf("run %d step %d: empty %v with %v in flight", run, step, f.empty(), want)
			}
		}
		if f.more != nil && len(f.more) == 0 {
			t.Fatalf("run %d: an empty map kept", run)
		}
	}
	// A clone does not share its map.
	var f InFlight
	f.add("a")
	f.add("b")
	c := f.Clone()
	c.add("b")
	if f.count("b") != 1 || maps.Equal(f.more, c.more) {
		t.Fatalf("a clone's add changed the original: %d", f.count("b"))
	}
}
