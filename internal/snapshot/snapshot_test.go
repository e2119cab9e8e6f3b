package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func cluster(name string, timeout time.Duration) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(timeout),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
	}
}

func inputs(reg *xdstype.Registry, msgs ...proto.Message) []snapshot.Input {
	var out []snapshot.Input
	for _, m := range msgs {
		out = append(out, snapshot.Input{Type: reg.Lookup(xdstype.ClusterURL), Name: xdstype.NameOf(m), Message: m})
	}
	return out
}

func build(t testing.TB, reg *xdstype.Registry, msgs ...proto.Message) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Build(reg, inputs(reg, msgs...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Versions are content hashes: the same content in any order, built in any
// process, gets the same versions; any change moves exactly the versions
// above it.
func TestVersionsAreContentHashes(t *testing.T) {
	reg := xdstype.New()
	a := build(t, reg, cluster("a", time.Second), cluster("b", 2*time.Second))
	b := build(t, reg, cluster("b", 2*time.Second), cluster("a", time.Second))
	if a.Version() != b.Version() || a.Set(xdstype.ClusterURL).Version() != b.Set(xdstype.ClusterURL).Version() {
		t.Fatal("same content, different versions")
	}
	// Pinned: a version must not change across releases or machines for
	// unchanged content, or every proxy would be resent everything after an
	// upgrade. Update only with a deliberate, documented format change (or
	// if a protobuf upgrade changes its deterministic encoding, which it
	// does not promise to keep: then say so in the release notes).
	if got, want := a.Set(xdstype.ClusterURL).Get("a").Version, "db38b1b22623d372"; got != want {
		t.Errorf("version of cluster a = %s, want %s", got, want)
	}
	c := build(t, reg, cluster("a", time.Second), cluster("b", 3*time.Second))
	ca, cc := a.Set(xdstype.ClusterURL), c.Set(xdstype.ClusterURL)
	if ca.Get("a").Version != cc.Get("a").Version {
		t.Error("unchanged resource a changed version")
	}
	if ca.Get("b").Version == cc.Get("b").Version || ca.Version() == cc.Version() || a.Version() == c.Version() {
		t.Error("changed resource b did not move its, its type's and the snapshot's versions")
	}
	if a.Set(xdstype.ListenerURL).Version() != c.Set(xdstype.ListenerURL).Version() {
		t.Error("an unchanged type changed version")
	}
}

// The encoded Any is the resource, decoded back unchanged.
func TestResourceEncodedOnce(t *testing.T) {
	reg := xdstype.New()
	in := cluster("a", time.Second)
	s := build(t, reg, in)
	r := s.Set(xdstype.ClusterURL).Get("a")
	if r.Any.GetTypeUrl() != xdstype.ClusterURL {
		t.Fatalf("type url %s", r.Any.GetTypeUrl())
	}
	out, err := r.Any.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out, protocmp.Transform()); diff != "" {
		t.Fatalf("round trip (-in +out):\n%s", diff)
	}
	// Rebuilding the same content yields byte-identical encodings.
	r2 := build(t, reg, cluster("a", time.Second)).Set(xdstype.ClusterURL).Get("a")
	if string(r.Any.Value) != string(r2.Any.Value) {
		t.Fatal("encoding is not deterministic")
	}
}

func TestPublisher(t *testing.T) {
	reg := xdstype.New()
	p := snapshot.NewPublisher()
	ch, cancel := p.Subscribe()
	defer cancel()
	s1 := build(t, reg, cluster("a", time.Second))
	if !p.Publish(snapshot.NewFleet(s1, time.Now())) {
		t.Fatal("first publish refused")
	}
	if p.Publish(snapshot.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now())) {
		t.Fatal("identical content published again")
	}
	// Many publishes wake a subscriber once; it reads the newest.
	var last *snapshot.Snapshot
	for i := range 10 {
		last = build(t, reg, cluster(fmt.Sprint("c", i), time.Second))
		p.Publish(snapshot.NewFleet(last, time.Now()))
	}
	wakes := 0
	for {
		select {
		case <-ch:
			wakes++
			continue
		default:
		}
		break
	}
	if wakes != 1 {
		t.Fatalf("subscriber woken %d times, want 1 (coalesced)", wakes)
	}
	if p.Current().For(nil) != last {
		t.Fatal("current is not the newest")
	}
	cancel()
	p.Publish(snapshot.NewFleet(build(t, reg, cluster("z", time.Second)), time.Now()))
	select {
	case <-ch:
		t.Fatal("woken after unsubscribing")
	default:
	}
}

// Notify calls back after each publish that changes the fleet, on the
// publishing goroutine, until stopped.
func TestPublisherNotify(t *testing.T) {
	reg := xdstype.New()
	p := snapshot.NewPublisher()
	calls := 0
	stop := p.Notify(func() { calls++ })
	p.Publish(snapshot.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now()))
	p.Publish(snapshot.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now()))
	if calls != 1 {
		t.Fatalf("%d calls after a publish and the same content again, want 1", calls)
	}
	stop()
	p.Publish(snapshot.NewFleet(build(t, reg, cluster("b", time.Second)), time.Now()))
	if calls != 1 {
		t.Fatalf("%d calls after stop, want 1", calls)
	}
}

// Callbacks added and stopped in any order: after each publish, every
// callback still registered has run once and no stopped one has; stopping
// twice changes nothing.
func TestPublisherNotifyManyInAnyOrder(t *testing.T) {
	p, fleets := snapshot.NewPublisher(), twoFleets(t)
	const n = 200
	calls := make([]int, n)
	stops := make([]func(), n)
	for i := range n {
		stops[i] = p.Notify(func() { calls[i]++ })
	}
	stopped := make([]bool, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 6 {
		for _, i := range rng.Perm(n)[:n/8] {
			stops[i]()
			stops[i]() // a second stop is harmless
			stopped[i] = true
		}
		before := slices.Clone(calls)
		p.Publish(fleets[round%2])
		for i := range n {
			want := before[i] + 1
			if stopped[i] {
				want = before[i]
			}
			if calls[i] != want {
				t.Fatalf("round %d: callback %d (stopped %v) ran %d times, want %d", round, i, stopped[i], calls[i]-before[i], want-before[i])
			}
		}
	}
}

// A stream woken by a publish reads Current and serves what it finds until
// the next wake-up: were the new fleet stored after the callbacks ran, a
// woken stream would read the old one and keep it until the next publish.
// Every callback, on every publish, reads the fleet being published.
func TestPublishWakesOnlyOnceTheFleetIsCurrent(t *testing.T) {
	p, fleets := snapshot.NewPublisher(), twoFleets(t)
	const callbacks, rounds = 3, 10
	read := make([][]*snapshot.Fleet, callbacks)
	for i := range callbacks {
		stop := p.Notify(func() { read[i] = append(read[i], p.Current()) })
		defer stop()
	}
	for round := range rounds {
		f := fleets[round%2]
		if !p.Publish(f) {
			t.Fatalf("round %d: a fleet other than the current one was refused", round)
		}
		for i := range callbacks {
			if len(read[i]) != round+1 {
				t.Fatalf("round %d: callback %d ran %d times, want %d", round, i, len(read[i]), round+1)
			}
			if got := read[i][round]; got != f {
				was := "none"
				if got != nil {
					was = got.Version()
				}
				t.Fatalf("round %d: callback %d read fleet %s, not the one being published (%s)", round, i, was, f.Version())
			}
		}
	}
}

// twoFleets are two fleets of different versions, to publish in turn.
func twoFleets(t testing.TB) []*snapshot.Fleet {
	reg := xdstype.New()
	return []*snapshot.Fleet{
		snapshot.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now()),
		snapshot.NewFleet(build(t, reg, cluster("b", time.Second)), time.Now()),
	}
}

// BenchmarkPublishNotify is a publish's fan-out to 10,000 streams: each
// callback touches state of its own, as a stream's wakeup does.
func BenchmarkPublishNotify(b *testing.B) {
	p, fleets := snapshot.NewPublisher(), twoFleets(b)
	// Each callback's state a 128-byte object of its own, as a stream's
	// wakeups are.
	states := make([][16]int, 10000)
	for i := range states {
		s := &states[i]
		p.Notify(func() { s[0]++ })
	}
	for n := 0; b.Loop(); n++ {
		p.Publish(fleets[n%2])
	}
}
