package relay

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// TestDisjointGroupsOnlyWhenNoNodeMatchesBoth: a group published while an
// earlier one waits for its first snapshot must take none of that one's
// nodes; unsure is not disjoint.
func TestDisjointGroupsOnlyWhenNoNodeMatchesBoth(t *testing.T) {
	for _, c := range []struct {
		a, b nodegroup.Match
		want bool
	}{
		{nodegroup.Match{Cluster: "a"}, nodegroup.Match{Cluster: "b"}, true},
		{nodegroup.Match{Cluster: "a"}, nodegroup.Match{Zone: "z"}, false},
		{nodegroup.Match{ID: "edge-*"}, nodegroup.Match{ID: "mesh-*"}, true},
		{nodegroup.Match{ID: "edge-*"}, nodegroup.Match{ID: "edge-eu-*"}, false},
		{nodegroup.Match{ID: "*-eu"}, nodegroup.Match{ID: "edge-*"}, false},
		{nodegroup.Match{Metadata: map[string]string{"role": "a"}}, nodegroup.Match{Metadata: map[string]string{"role": "b"}}, true},
		{nodegroup.Match{Metadata: map[string]string{"role": "a"}}, nodegroup.Match{Metadata: map[string]string{"tier": "b"}}, false},
		{nodegroup.Match{}, nodegroup.Match{Cluster: "a"}, false},
	} {
		if got := disjoint(c.a, c.b); got != c.want || disjoint(c.b, c.a) != c.want {
			t.Errorf("disjoint(%+v, %+v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
