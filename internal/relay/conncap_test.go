package relay_test

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Keys' streams are spread over upstream connections, at most
// --upstream-streams-per-connection on each: with every key on one
// connection, the keys past the upstream's own per-connection bound
// waited for a stream that never came, unanswered and unreported.
func TestRelayKeysPastTheUpstreamsPerConnectionBoundAreServed(t *testing.T) {
	up := startUpstreamWith(t, "", greeter(9001), func(o *daemon.Options) { o.MaxStreamsPerConnection = 3 })
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{Key: "{cluster}", StreamsPerConnection: 3})
	conn := xdstest.Dial(t, rd.xds)
	var streams []*xdstest.DeltaStream
	for i := range 7 {
		s := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: fmt.Sprint("p", i), Cluster: fmt.Sprint("c", i)})
		s.Subscribe(xdstype.ClusterURL, "*")
		streams = append(streams, s)
	}
	for i, s := range streams {
		if _, err := s.NextWithin(xdstest.Timeout); err != nil {
			t.Fatalf("key c%d, with the upstream taking 3 streams a connection: %v", i, err)
		}
	}
}
