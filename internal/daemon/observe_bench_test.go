package daemon

import (
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// BenchmarkObserveEDSChange is what status tracking and metrics cost the
// xDS server per stream when an EDS change reaches a fleet: each stream
// reports the version it should now hold, the response sent and its ACK.
// Issue 18 asks for under 5% of the change's CPU: the server spends about
// 34 us per stream on an EDS change (0.170 s for 5,000 streams,
// docs/BENCHMARKS.md), so the three events should take under 1.7 us.
func BenchmarkObserveEDSChange(b *testing.B) {
	const streams = 10000
	reg := xdstype.New()
	obs := NewObservability(reg, snapshot.NewPublisher())
	o := obs.Observer
	eds := xdstype.EndpointURL
	nodes := make([]*corev3.Node, streams)
	now := time.Now()
	for i := range nodes {
		nodes[i] = &corev3.Node{Id: fmt.Sprintf("proxy-%d", i), Cluster: "edge", UserAgentName: "envoy"}
		e := xds.Event{StreamID: uint64(i + 1), Node: nodes[i], Group: "edge", ADS: true, TypeURL: eds, At: now}
		for _, k := range []xds.EventKind{xds.StreamOpened, xds.Subscribed} {
			e.Kind = k
			o.Observe(&e)
		}
		e.Kind, e.Version, e.Nonce, e.Resources, e.Bytes = xds.ResponseSent, "v0", "1", 1, 400
		o.Observe(&e)
		e.Kind = xds.RequestACK
		o.Observe(&e)
	}
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		v, nonce := fmt.Sprintf("v%d", n+1), fmt.Sprint(n+2)
		for i := range nodes {
			e := xds.Event{StreamID: uint64(i + 1), Node: nodes[i], Group: "edge", ADS: true, TypeURL: eds, At: now,
				Version: v, SetVersion: v, Nonce: nonce, Resources: 1, Bytes: 415}
			e.Kind = xds.ExpectedVersion
			o.Observe(&e)
			e.Kind = xds.ResponseSent
			o.Observe(&e)
			e.Kind = xds.RequestACK
			o.Observe(&e)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*streams), "ns/stream")
}
