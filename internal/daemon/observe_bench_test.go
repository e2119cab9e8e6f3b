package daemon

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// BenchmarkObserveEDSChange is what the status tracker and the metrics
// cost per stream when an EDS change reaches a fleet. Each stream keeps
// what it sent and what its client ACKed (xds.StreamStatus), so the
// observer is told one thing: the stream took the change's version
// (VersionTaken), which times the push. It is only the observer's part:
// the xds server's part (the stream's status, the event) and what both do
// to the collector are in the fleet benchmark's difference between -impl
// pylon and pylon-unobserved (docs/BENCHMARKS.md).
func BenchmarkObserveEDSChange(b *testing.B) {
	// workers: the streams' events come from this many goroutines at
	// once, as from the server's two cores; the figure is per stream and
	// worker, so contention shows as a higher one.
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { observeEDSChange(b, workers) })
	}
}

func observeEDSChange(b *testing.B, workers int) {
	const streams = 10000
	reg := xdstype.New()
	obs := NewObservability(reg, snapshot.NewPublisher())
	o := obs.Observer
	eds := xdstype.EndpointURL
	nodes := make([]*corev3.Node, streams)
	now := time.Now()
	for i := range nodes {
		nodes[i] = &corev3.Node{Id: fmt.Sprintf("proxy-%d", i), Cluster: "edge", UserAgentName: "envoy"}
		e := xds.Event{Kind: xds.StreamOpened, StreamID: uint64(i + 1), Node: nodes[i], Group: "edge", ADS: true, At: now}
		o.Observe(&e)
		// An Envoy's ADS stream: the change reaches one of its four
		// types, EDS, not the first in the tracker's order.
		for _, url := range []string{xdstype.ClusterURL, eds, xdstype.ListenerURL, xdstype.RouteURL} {
			e.TypeURL = url
			e.Kind, e.Version, e.Nonce, e.Resources, e.Bytes = xds.Subscribed, "", "", 0, 0
			o.Observe(&e)
			e.Kind, e.Version, e.Nonce, e.Resources, e.Bytes = xds.ResponseSent, "v0", "1", 1, 400
			o.Observe(&e)
			e.Kind = xds.RequestACK
			o.Observe(&e)
		}
	}
	// As in a running server, a change reaches the streams in no order
	// of theirs, and after other work has taken the caches: the streams'
	// state is read from memory, which is most of what it costs.
	order := rand.New(rand.NewPCG(1, 2)).Perm(streams)
	evict := make([]byte, 64<<20)
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		v := fmt.Sprintf("v%d", n+1)
		obs.Tracker.Published(map[string][]string{eds: {v}}, now.Add(time.Second))
		for i := 0; i < len(evict); i += 64 {
			evict[i]++
		}
		b.StartTimer()
		at := now.Add(2 * time.Second)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for _, i := range order[w*streams/workers : (w+1)*streams/workers] {
					e := xds.Event{Kind: xds.VersionTaken, StreamID: uint64(i + 1), Node: nodes[i], Group: "edge", ADS: true, TypeURL: eds, At: at,
						Version: v, SetVersion: v, Opened: now}
					o.Observe(&e)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds()*int64(workers))/float64(b.N*streams), "ns/stream")
}
