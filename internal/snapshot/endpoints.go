package snapshot

import (
	"maps"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// ConfigVersion is the snapshot's version leaving out its
// ClusterLoadAssignments: what a staged rollout rolls out. Endpoints are
// runtime state (registrations, leases, health) that every node gets
// current whatever its stage, so a change of endpoints alone is no change
// to roll out.
func (s *Snapshot) ConfigVersion() string {
	if s == nil {
		return ""
	}
	return s.configVersion
}

// WithEndpointsOf returns s with the assignments of cur: every assignment
// cur has, and s's own for the clusters cur has none for (a cluster the
// new config dropped, which the nodes running s still use). Everything else
// is s's, shared. It returns s itself when the assignments are the same.
func (s *Snapshot) WithEndpointsOf(cur *Snapshot) *Snapshot {
	mine, theirs := s.Set(xdstype.EndpointURL), cur.Set(xdstype.EndpointURL)
	if mine == nil || theirs == nil || mine.version == theirs.version {
		return s
	}
	t := mine.typ
	byName := make(map[string]*Resource, len(mine.byName)+len(theirs.byName))
	maps.Copy(byName, mine.byName)
	maps.Copy(byName, theirs.byName)
	merged := newSet(t, byName)
	if merged.version == mine.Version() {
		return s
	}
	return s.withSet(merged)
}
