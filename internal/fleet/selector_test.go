package fleet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestSelectorServesNamesAndGlobs(t *testing.T) {
	s, err := fleet.ParseSelector(" web-*, db ,cache-?")
	if err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]bool{"web-eu": true, "web-": true, "db": true, "cache-1": true, "cache-10": false, "dbx": false, "batch": false} {
		if got := s.Serves(group); got != want {
			t.Errorf("%v.Serves(%q) = %v, want %v", s, group, got, want)
		}
	}
	if s.String() != "web-*,db,cache-?" {
		t.Errorf("String() = %q", s.String())
	}
	for _, all := range []string{"", "*", "a,*"} {
		s, err := fleet.ParseSelector(all)
		if err != nil || s != nil || !s.Serves("anything") || s.String() != "*" {
			t.Errorf("fleet.ParseSelector(%q) = %v, %v; want every group", all, s, err)
		}
	}
}

func TestSelectorRefusesBadPatterns(t *testing.T) {
	for in, want := range map[string]string{
		"a,,b":                          "pattern 2 is empty",
		"web-[":                         `bad pattern "web-["`,
		strings.Repeat("x", 300):        "300 bytes",
		strings.Repeat("a,", 300) + "a": "301 patterns",
	} {
		if _, err := fleet.ParseSelector(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("fleet.ParseSelector(%.20q…) = %v, want an error saying %q", in, err, want)
		}
	}
}

// Which groups a replica serves is part of the fleet's version: the same
// content served by another shard is another fleet.
func TestServeOnlyChangesTheVersion(t *testing.T) {
	mk := func() *fleet.Fleet {
		rules := nodegroup.Groups{{Name: "a", Match: nodegroup.Match{ID: "a-*"}}, {Name: "b", Default: true}}
		return fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{build(t, xdstype.New(), cluster("x", time.Second)), build(t, xdstype.New(), cluster("y", time.Second))})
	}
	all, onlyA := mk(), mk()
	onlyA.ServeOnly(fleet.Selector{"a"})
	if all.Version() == onlyA.Version() {
		t.Error("serving only group a left the fleet's version as it was")
	}
	if g, _ := onlyA.Lookup("b"); !g.Unserved {
		t.Error("group b is not marked Unserved")
	}
	if g, _ := onlyA.Lookup("a"); g.Unserved {
		t.Error("group a is marked Unserved")
	}
}
