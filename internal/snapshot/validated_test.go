package snapshot_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A build remembering what passed still refuses what changed into
// something invalid, whatever passed before under the same name.
func TestValidatedStillRefusesChanges(t *testing.T) {
	reg := xdstype.New()
	var v snapshot.Validated
	for i := range 3 {
		if _, err := snapshot.BuildValidated(reg, inputs(reg, cluster("a", time.Second), cluster("b", 2*time.Second)), &v); err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
	}
	_, err := snapshot.BuildValidated(reg, inputs(reg, cluster("a", time.Second), cluster("b", -time.Second)), &v)
	if err == nil || !strings.Contains(err.Error(), "connect_timeout") {
		t.Fatalf("an invalid change after valid builds: %v, want it refused naming connect_timeout", err)
	}
	// And the valid content again passes.
	if _, err := snapshot.BuildValidated(reg, inputs(reg, cluster("a", time.Second), cluster("b", 2*time.Second)), &v); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkBuildValidated builds 2,000 clusters with one changed per
// build, validating everything (Build) or only what changed.
func BenchmarkBuildValidated(b *testing.B) {
	reg := xdstype.New()
	world := func(n int) []xdstype.Resource {
		var msgs []proto.Message
		for i := range 2000 {
			timeout := time.Second
			if i == n%2000 {
				timeout = time.Duration(n%7+2) * time.Second
			}
			msgs = append(msgs, cluster(string(rune('a'+i%26))+strings.Repeat("x", i/26), timeout))
		}
		return inputs(reg, msgs...)
	}
	b.Run("Build", func(b *testing.B) {
		for n := 0; b.Loop(); n++ {
			if _, err := snapshot.Build(reg, world(n)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BuildValidated", func(b *testing.B) {
		var v snapshot.Validated
		for n := 0; b.Loop(); n++ {
			if _, err := snapshot.BuildValidated(reg, world(n), &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A message built again through a Validated gets the Resource it got
// before only under the same name and TTL: the TTL is part of what a
// client receives, and so of the version.
func TestValidatedRebuildsAMessageUnderAnotherTTL(t *testing.T) {
	reg := xdstype.New()
	var v snapshot.Validated
	in := inputs(reg, cluster("a", time.Second))
	first, err := snapshot.BuildValidated(reg, in, &v)
	if err != nil {
		t.Fatal(err)
	}
	again, err := snapshot.BuildValidated(reg, in, &v)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := first.Set(xdstype.ClusterURL).Get("a"), again.Set(xdstype.ClusterURL).Get("a"); a != b {
		t.Errorf("the same message built again is a new Resource (%p, then %p), want the first shared", a, b)
	}
	in[0].TTL = time.Minute
	ttl, err := snapshot.BuildValidated(reg, in, &v)
	if err != nil {
		t.Fatal(err)
	}
	r := ttl.Set(xdstype.ClusterURL).Get("a")
	if r.TTL == nil || r.Version == first.Set(xdstype.ClusterURL).Get("a").Version {
		t.Errorf("the message built again with a TTL: TTL %v, version %s (as without), want a TTL and a version of its own", r.TTL, r.Version)
	}
}

// An invalid message given again is refused again: only what passed is
// kept for the next build.
func TestValidatedRefusesTheSameInvalidMessageAgain(t *testing.T) {
	reg := xdstype.New()
	var v snapshot.Validated
	in := inputs(reg, cluster("a", time.Second), cluster("b", -time.Second))
	for i := range 3 {
		if _, err := snapshot.BuildValidated(reg, in, &v); err == nil || !strings.Contains(err.Error(), "connect_timeout") {
			t.Fatalf("build %d of an invalid message: %v, want it refused naming connect_timeout", i, err)
		}
	}
}
