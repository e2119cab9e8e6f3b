package status

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// ACKs from many streams at once add their samples without a lock: none is
// lost from the count, and the window holds exactly the samples added
// (each a distinct duration here) once they stop, whoever wrote which slot.
func TestLatencyRingConcurrent(t *testing.T) {
	const writers, each = 4, latencySamples / 2
	var r ring
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r.add(uint64(i), t0.Add(time.Duration(w*each+i)), time.Duration(w*each+i+1))
			}
		})
	}
	wg.Wait()
	d, n := r.samples()
	if n != writers*each || len(d) != latencySamples {
		t.Fatalf("%d writers adding %d each: count %d, window %d; want %d, %d", writers, each, n, len(d), writers*each, latencySamples)
	}
	// A slot claimed and not yet written (an add between its two steps)
	// is left out, not read as a latency of 0.
	var filling ring
	filling.add(0, t0, 5*time.Millisecond)
	filling.shards[0].n.Add(1) // claimed, not written
	if d, n := filling.samples(); n != 2 || len(d) != 1 || d[0] != 5*time.Millisecond {
		t.Fatalf("a ring with one sample and one slot claimed: %v of %d; want [5ms] of 2", d, n)
	}
	seen := map[time.Duration]bool{}
	for _, x := range d {
		if x < 1 || x > writers*each || seen[x] {
			t.Fatalf("window holds %v: not one of the samples added, or twice", x)
		}
		seen[x] = true
	}
}

// The window is the newest samples of all the ring's shards: samples of a
// shard whose streams went quiet fall out of it as the others add newer
// ones, rather than stay in every percentile.
func TestLatencyWindowDropsQuietShards(t *testing.T) {
	var r ring
	t0 := time.Now()
	for i := range 100 {
		r.add(0, t0.Add(time.Duration(i)), time.Hour) // old, from one shard
	}
	for i := range latencySamples {
		r.add(uint64(1+i%(ringShards-1)), t0.Add(time.Minute+time.Duration(i)), time.Millisecond)
	}
	d, n := r.samples()
	if n != 100+latencySamples || len(d) != latencySamples {
		t.Fatalf("count %d, window %d; want %d, %d", n, len(d), 100+latencySamples, latencySamples)
	}
	if slices.Max(d) != time.Millisecond {
		t.Fatalf("the window holds %v: an old sample of a quiet shard", slices.Max(d))
	}
}
