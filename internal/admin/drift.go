package admin

import (
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// maxDriftNames bounds the names a drift lists per kind; the rest are
// counted.
const maxDriftNames = 50

// typeDrift is, for one type of a stream, the difference between what the
// proxy runs (the version it ACKed, and what the last response carried)
// and what it should run (the version status expects, and the group's
// resources now).
type typeDrift struct {
	Type   string `json:"type"`
	Runs   string `json:"runs"`
	Should string `json:"should"`
	InSync bool   `json:"inSync"`
	// Changed: carried by the last response with content that differs
	// from the group's now; Removed: carried, and the group no longer has
	// them; Missing: the group has them, the stream subscribes to them
	// (by the wildcard or by name) and the last response did not carry
	// them (only for state-of-the-world Listeners and Clusters, whose
	// responses carry the whole subscribed set).
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
	Missing []string `json:"missing"`
	// More counts names left out of the lists by their bound.
	More int `json:"more,omitempty"`
	// Carried and GroupHas count the last response's resources and the
	// group's.
	Carried  int `json:"carried"`
	GroupHas int `json:"groupHas"`
}

// drift compares each type of s with its group's snapshot in f.
func drift(reg *xdstype.Registry, f *fleet.Fleet, s status.Stream) []typeDrift {
	out := []typeDrift{}
	var snap *snapshot.Snapshot
	if f != nil {
		for _, g := range f.Groups() {
			if g.Name == s.Group {
				snap = g.Snapshot
			}
		}
	}
	for _, t := range s.Types {
		d := typeDrift{Type: t.Type, Should: t.Expected, Changed: []string{}, Removed: []string{}, Missing: []string{}}
		if t.ACKed != nil {
			d.Runs = t.ACKed.Version
		}
		d.InSync = t.State == status.Synced
		typ := byAbbrev(reg, t.Type)
		var set *snapshot.Set
		if snap != nil && typ != nil {
			set = snap.Set(typ.URL)
		}
		d.compare(t, set, typ != nil && typ.FullState && !isDelta(s.Kind))
		out = append(out, d)
	}
	return out
}

func isDelta(kind string) bool { return len(kind) >= 5 && kind[len(kind)-5:] == "delta" }

// byAbbrev finds a type by its abbreviation ("CDS").
func byAbbrev(reg *xdstype.Registry, abbrev string) *xdstype.Type {
	if reg == nil {
		return nil
	}
	for _, t := range reg.Ranked() {
		if t.Abbrev == abbrev {
			return t
		}
	}
	return nil
}

// compare fills the name lists from the last response's resources and the
// group's set (nil: the group has none of the type).
func (d *typeDrift) compare(t *status.Type, set *snapshot.Set, full bool) {
	sent := map[string]bool{}
	d.Carried = len(t.LastSent)
	if set != nil {
		d.GroupHas = set.Len()
	}
	for _, m := range t.LastSent {
		name := xdstype.NameOf(m)
		sent[name] = true
		var now *snapshot.Resource
		if set != nil {
			now = set.Get(name)
		}
		switch {
		case now == nil:
			d.add(&d.Removed, name)
		case !proto.Equal(m, now.Message):
			d.add(&d.Changed, name)
		}
	}
	if full && set != nil {
		for _, n := range subscribed(t.Subscription, set) {
			if !sent[n] {
				d.add(&d.Missing, n)
			}
		}
	}
	sort.Strings(d.Changed)
	sort.Strings(d.Removed)
}

// subscribed is what of set the stream should hold by its subscription,
// sorted: the whole set for the wildcard (and for a stream whose
// subscription status was not told), else the names it subscribes to that
// the group has. A proxyless gRPC client asks for its own listeners and
// clusters by name: the group's others are not missing from it.
func subscribed(sub *status.Subscription, set *snapshot.Set) []string {
	if sub == nil || sub.Wildcard {
		return set.Names()
	}
	var out []string
	for _, n := range sub.Names {
		if set.Get(n) != nil {
			out = append(out, n)
		}
	}
	return out
}

func (d *typeDrift) add(list *[]string, name string) {
	if len(*list) >= maxDriftNames {
		d.More++
		return
	}
	*list = append(*list, name)
}
