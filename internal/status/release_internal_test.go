package status

import (
	"testing"
	"time"
)

// Releases are bounded: per version at most maxReleases are kept (the
// newest), and a version the tracker no longer remembers as accepted
// keeps none.
func TestReleasesAreBounded(t *testing.T) {
	tr := NewTracker(Options{})
	t0 := time.Now()
	tr.Published(map[string][]string{"cds": {"v1"}}, t0)
	for i := range 3 * maxReleases {
		tr.Released(map[string][]string{"cds": {"v1"}, "lds": {"unknown"}}, t0.Add(time.Duration(i+1)*time.Second))
	}
	rel := *tr.released.Load()
	if n := len(rel[acceptKey{"cds", "v1"}]); n != maxReleases {
		t.Errorf("%d releases kept of v1; want %d", n, maxReleases)
	}
	if last := rel[acceptKey{"cds", "v1"}][maxReleases-1]; !last.Equal(t0.Add(3 * maxReleases * time.Second)) {
		t.Errorf("the newest release kept is %v; want the last one", last.Sub(t0))
	}
	if _, ok := rel[acceptKey{"lds", "unknown"}]; ok {
		t.Error("a release of a version never accepted is kept")
	}
}
