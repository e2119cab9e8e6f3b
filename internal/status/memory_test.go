package status

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// BenchmarkStatusMemoryPerStream is the heap the tracker keeps per stream
// of a fleet (issue 18): N ADS streams of four types (CDS, EDS, LDS, RDS),
// fed the events internal/daemon's tracking observer passes on for each
// (open, request, subscription of the full-state types, expected version,
// response, ACK) and then a second round of the same as a publish brings.
// What the xds server keeps anyway (node ids, peers, its nonces, the
// versions of its snapshots, the resources sent) is made before the
// measure; what arrives fresh with each request (an ACK's version and
// nonce, unmarshalled from the client's message) is made inside it.
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
	infos := make([]Info, n)
	nonces := make([][2][4]string, n)
	for id := range n {
		infos[id] = Info{
			Node: fmt.Sprintf("proxy-%05d", id), Cluster: "edge", Peer: fmt.Sprintf("10.0.%d.%d:%d", id/250, id%250, 40000+id),
			Kind: "ADS", Agent: "envoy", AgentVersion: "1.30.1",
		}
		for r := range 2 {
			for i := range urls {
				nonces[id][r][i] = strconv.Itoa(r*4 + i + 1)
			}
		}
	}
	for b.Loop() {
		var tr *Tracker
		before := heap()
		tr = NewTracker(Options{
			Expected: func(string, string) string { return "" },
			Abbrev:   func(u string) string { return abbrev[u] },
		})
		at := time.Now()
		for id := range uint64(n) {
			info := infos[id]
			tr.Seen(id, info, "edge", at)
			for _, u := range urls {
				tr.Requested(id, info, u, at)
				if fullState[u] {
					tr.Subscribed(id, info, u, true, nil, at)
				}
			}
			for r := range 2 {
				for i, u := range urls {
					v, nonce := versions[r][i], nonces[id][r][i]
					at = at.Add(time.Microsecond)
					tr.ExpectOf(id, info, u, v, v, at)
					tr.Seen(id, info, "edge", at)
					tr.Sent(id, info, u, Stamp{Version: v, Nonce: nonce, At: at, Resources: 3}, sent[i], nil)
					at = at.Add(time.Microsecond)
					// The client's strings, fresh from its request.
					tr.ACKed(id, info, u, Stamp{Version: strings.Clone(v), Set: v, Nonce: strings.Clone(nonce), At: at})
				}
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
