package fleet

import (
	"fmt"
	"path"
	"strings"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// Bounds of a Selector: it is published with this replica's summary and
// shown to other replicas.
const (
	maxSelectorPatterns = 256
	maxSelectorPattern  = 256
)

// Selector is the node groups one replica set serves (`pylon serve
// --groups`): names or path.Match globs. Nil serves every group.
type Selector []string

// ParseSelector reads a comma list of group names or globs; "" or "*" is
// every group (nil).
func ParseSelector(s string) (Selector, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return nil, nil
	}
	var out Selector
	for i, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return nil, fmt.Errorf("--groups: pattern %d is empty", i+1)
		case len(p) > maxSelectorPattern:
			return nil, fmt.Errorf("--groups: pattern %d is %d bytes; at most %d", i+1, len(p), maxSelectorPattern)
		case p == "*":
			return nil, nil
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("--groups: bad pattern %q: %v", p, err)
		}
		out = append(out, p)
	}
	if len(out) > maxSelectorPatterns {
		return nil, fmt.Errorf("--groups: %d patterns; at most %d", len(out), maxSelectorPatterns)
	}
	return out, nil
}

// Serves reports whether the group named is one of s's (every group for a
// nil s).
func (s Selector) Serves(group string) bool {
	if s == nil {
		return true
	}
	for _, p := range s {
		if ok, _ := path.Match(p, group); ok {
			return true
		}
	}
	return false
}

// String is s as --groups takes it; "*" for every group.
func (s Selector) String() string {
	if s == nil {
		return "*"
	}
	return strings.Join(s, ",")
}

// ServeOnly marks the groups s does not take Unserved, for a replica of
// one shard (compile does, having built them empty). Which groups are
// served is part of the fleet's version: a shard's change of --groups, or
// a node moved to a group served elsewhere, reaches the streams. Call
// before publishing.
func (f *Fleet) ServeOnly(s Selector) {
	var unserved []string
	for _, g := range f.groups {
		g.Unserved = !s.Serves(g.Name)
		if g.Unserved {
			unserved = append(unserved, g.Name)
		}
	}
	if len(unserved) > 0 {
		f.version = snapshot.HashPairs([][2]string{{"fleet", f.version}, {"unserved", strings.Join(unserved, "\x00")}})
	}
}
