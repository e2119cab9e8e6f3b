package fleet_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestPublisher(t *testing.T) {
	reg := xdstype.New()
	p := fleet.NewPublisher()
	ch, cancel := p.Subscribe()
	defer cancel()
	s1 := build(t, reg, cluster("a", time.Second))
	if !p.Publish(fleet.NewFleet(s1, time.Now())) {
		t.Fatal("first publish refused")
	}
	if p.Publish(fleet.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now())) {
		t.Fatal("identical content published again")
	}
	// Many publishes wake a subscriber once; it reads the newest.
	var last *snapshot.Snapshot
	for i := range 10 {
		last = build(t, reg, cluster(fmt.Sprint("c", i), time.Second))
		p.Publish(fleet.NewFleet(last, time.Now()))
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
	p.Publish(fleet.NewFleet(build(t, reg, cluster("z", time.Second)), time.Now()))
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
	p := fleet.NewPublisher()
	calls := 0
	stop := p.Notify(func() { calls++ })
	p.Publish(fleet.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now()))
	p.Publish(fleet.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now()))
	if calls != 1 {
		t.Fatalf("%d calls after a publish and the same content again, want 1", calls)
	}
	stop()
	p.Publish(fleet.NewFleet(build(t, reg, cluster("b", time.Second)), time.Now()))
	if calls != 1 {
		t.Fatalf("%d calls after stop, want 1", calls)
	}
}

// Callbacks added and stopped in any order: after each publish, every
// callback still registered has run once and no stopped one has; stopping
// twice changes nothing.
func TestPublisherNotifyManyInAnyOrder(t *testing.T) {
	p, fleets := fleet.NewPublisher(), twoFleets(t)
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
	p, fleets := fleet.NewPublisher(), twoFleets(t)
	const callbacks, rounds = 3, 10
	read := make([][]*fleet.Fleet, callbacks)
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
func twoFleets(t testing.TB) []*fleet.Fleet {
	reg := xdstype.New()
	return []*fleet.Fleet{
		fleet.NewFleet(build(t, reg, cluster("a", time.Second)), time.Now()),
		fleet.NewFleet(build(t, reg, cluster("b", time.Second)), time.Now()),
	}
}

// BenchmarkPublishNotify is a publish's fan-out to 10,000 streams: each
// callback touches state of its own, as a stream's wakeup does.
func BenchmarkPublishNotify(b *testing.B) {
	p, fleets := fleet.NewPublisher(), twoFleets(b)
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

// A publish calls no callback under the publisher's lock: a callback that
// registers another, stops itself or publishes (as a stream woken by a
// publish may open or close) returns, where under the lock it would wait
// on itself for ever.
func TestNotifyCallbacksRunOutsideThePublishersLock(t *testing.T) {
	p, fleets := fleet.NewPublisher(), twoFleets(t)
	var stop func()
	registered, republished := 0, false
	stop = p.Notify(func() {
		p.Notify(func() { registered++ })()
		if !republished {
			republished = true
			p.Publish(fleets[1])
		}
		stop()
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Publish(fleets[0])
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish did not return: a callback waited on the publisher's lock")
	}
	if p.Current() != fleets[1] || registered != 0 {
		t.Fatalf("current %v, want the fleet the callback published; the callback registered after the publish ran %d times, want 0", p.Current().Version(), registered)
	}
}

// Streams open and close while publishes walk the callbacks: what a
// publish walks is never changed under it (the race detector watches), a
// callback stopped during a walk is not called by a later publish, and
// after it all every callback still registered runs once per publish.
func TestNotifyAndStopDuringPublishes(t *testing.T) {
	p, fleets := fleet.NewPublisher(), twoFleets(t)
	const streams, rounds = 64, 200
	var mu sync.Mutex
	calls := make([]int, streams)
	stops := make([]func(), streams)
	for i := range streams {
		stops[i] = p.Notify(func() { mu.Lock(); calls[i]++; mu.Unlock() })
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for round := range rounds {
			p.Publish(fleets[round%2])
		}
	})
	wg.Go(func() {
		// Half the streams close and reopen, each as a new callback.
		for round := range rounds {
			i := round % (streams / 2)
			stops[i]()
			stops[i] = p.Notify(func() { mu.Lock(); calls[i]++; mu.Unlock() })
		}
	})
	wg.Wait()
	mu.Lock()
	before := slices.Clone(calls)
	mu.Unlock()
	cur := p.Current()
	p.Publish(fleets[0])
	if cur == fleets[0] {
		p.Publish(fleets[1])
	}
	for i := range streams {
		if calls[i]-before[i] != 1 {
			t.Errorf("callback %d ran %d times in the last publish, want 1", i, calls[i]-before[i])
		}
	}
}

// Publishes from several goroutines at once: each that reports a change
// made one (the fleet current just before it was the other), so with two
// fleets published in turn the changes alternate and the newest change is
// the fleet current at the end. The callbacks run one publish at a time
// (the race detector watches their state, which nothing guards), and the
// last of them read the fleet current at the end.
func TestConcurrentPublishesLeaveTheNewestCurrent(t *testing.T) {
	p, fleets := fleet.NewPublisher(), twoFleets(t)
	var seen *fleet.Fleet
	walks := 0
	defer p.Notify(func() {
		seen = p.Current()
		runtime.Gosched() // another publish, if any, meanwhile
		walks++
	})()
	p.Publish(fleets[0])
	const publishers, rounds = 4, 500
	changed := make([][2]int, publishers)
	var wg sync.WaitGroup
	for g := range publishers {
		wg.Go(func() {
			for round := range rounds {
				if i := (round + 1) % 2; p.Publish(fleets[i]) {
					changed[g][i]++
				}
			}
		})
	}
	wg.Wait()
	var n [2]int
	for _, c := range changed {
		n[0], n[1] = n[0]+c[0], n[1]+c[1]
	}
	// After fleets[0]: fleets[1], fleets[0], fleets[1], ...
	var want *fleet.Fleet
	switch n[1] - n[0] {
	case 0:
		want = fleets[0]
	case 1:
		want = fleets[1]
	default:
		t.Fatalf("%d changes to fleet 0 and %d to fleet 1 after fleet 0: two publishes changed the fleet to the same one", n[0], n[1])
	}
	if p.Current() != want {
		t.Fatalf("current is fleet %s, not the newest change's %s", p.Current().Version(), want.Version())
	}
	if seen != want || walks == 0 {
		t.Fatalf("the last callback read fleet %v (%d calls), not the one current at the end (%s)", seen, walks, want.Version())
	}
}

// A callback that panics, in a publish whose caller recovers (an HTTP
// handler's), leaves the publisher working: the next publish calls every
// callback.
func TestPublishesWakeAfterACallbackPanicked(t *testing.T) {
	p, fleets := fleet.NewPublisher(), twoFleets(t)
	calls, panicking := 0, true
	defer p.Notify(func() {
		if panicking {
			panicking = false
			panic("callback")
		}
	})()
	defer p.Notify(func() { calls++ })()
	func() {
		defer func() { _ = recover() }()
		p.Publish(fleets[0])
	}()
	before := calls
	p.Publish(fleets[1])
	if calls != before+1 || p.Current() != fleets[1] {
		t.Fatalf("after a callback panicked: the next publish called the others %d times, want 1 (current is the new fleet: %v)", calls-before, p.Current() == fleets[1])
	}
}
