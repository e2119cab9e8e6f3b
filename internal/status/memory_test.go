package status_test

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/status/statustest"
)

// BenchmarkStatusMemoryPerStream is the heap the tracker keeps per stream
// of a fleet (issue 18): N ADS streams of four types (CDS, EDS, LDS, RDS),
// fed the events internal/daemon's tracking observer passes on for each
// (open, request, subscription of the full-state types, its group as a
// publish brings it again) and attached live. What the xds server keeps
// anyway (node ids, peers, its nonces, the versions of its snapshots, the
// resources sent, and each stream's own stamps of what it sent and its
// client ACKed, read through Live) is made before the measure.
//
//	go test ./internal/status -run '^$' -bench StatusMemoryPerStream -benchtime 1x
func BenchmarkStatusMemoryPerStream(b *testing.B) {
	const n = 10_000
	urls := []string{
		"type.googleapis.com/envoy.config.cluster.v3.Cluster",
		"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
		"type.googleapis.com/envoy.config.listener.v3.Listener",
		"type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
	}
	abbrev := map[string]string{urls[0]: "CDS", urls[1]: "EDS", urls[2]: "LDS", urls[3]: "RDS"}
	fullState := map[string]bool{urls[0]: true, urls[2]: true}
	versions := [2][4]string{}
	sent := [4][]proto.Message{}
	for r := range versions {
		for i := range urls {
			versions[r][i] = fmt.Sprintf("%016x", r*100+i+1)
		}
	}
	for i := range sent {
		sent[i] = make([]proto.Message, 3)
	}
	infos := make([]status.Info, n)
	nonces := make([][2][4]string, n)
	for id := range n {
		infos[id] = status.Info{
			Node: fmt.Sprintf("proxy-%05d", id), Cluster: "edge", Peer: fmt.Sprintf("10.0.%d.%d:%d", id/250, id%250, 40000+id),
			Kind: "ADS", Agent: "envoy", AgentVersion: "1.30.1",
		}
		for r := range 2 {
			for i := range urls {
				nonces[id][r][i] = strconv.Itoa(r*4 + i + 1)
			}
		}
	}
	// The streams keep their own stamps (Live), as the xds server's do:
	// made before the measure, with what two rounds left in them.
	lives := make([]*statustest.Stream, n)
	for id := range lives {
		lives[id] = statustest.NewStream("edge")
		for i, u := range urls {
			v := versions[1][i]
			a := status.Stamp{Version: v, Nonce: nonces[id][1][i], At: time.Now(), Resources: 3}
			lives[id].Set(u, status.Stamps{Expected: v, Sent: a, ACKed: a, ACKedSince: a.At, LastSent: sent[i], Responses: 2, ACKs: 2})
		}
	}
	for b.Loop() {
		var tr *status.Tracker
		before := heap()
		tr = status.NewTracker(status.Options{
			Expected: func(string, string) string { return "" },
			Abbrev:   func(u string) string { return abbrev[u] },
		})
		at := time.Now()
		for id := range uint64(n) {
			info := infos[id]
			tr.Seen(id, info, "edge", at)
			tr.Attach(id, info, lives[id], at)
			for _, u := range urls {
				tr.Requested(id, info, u, at)
				if fullState[u] {
					tr.Subscribed(id, info, u, true, nil, at)
				}
			}
			for range 2 {
				at = at.Add(time.Microsecond)
				tr.Seen(id, info, "edge", at)
			}
		}
		after := heap()
		runtime.KeepAlive(tr)
		b.ReportMetric(float64(after-before)/n, "B/stream")
	}
}

// heap is the live heap after a collection.
func heap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
