package upstream_test

import (
	"net"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// lateBeats sends cluster c1 with a short TTL and no heartbeat, then,
// when told (beat), a heartbeat of it; a request subscribing to c1 by
// name is answered with c1 again, without a TTL.
type lateBeats struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	beat  chan struct{}
	asked chan struct{}
}

func (l *lateBeats) DeltaAggregatedResources(s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	c1, err := anypb.New(xdstest.Cluster("c1"))
	if err != nil {
		return err
	}
	reqs := make(chan *discoveryv3.DeltaDiscoveryRequest)
	go func() {
		defer close(reqs)
		for {
			req, err := s.Recv()
			if err != nil {
				return
			}
			select {
			case reqs <- req:
			case <-s.Context().Done():
				return
			}
		}
	}()
	send := func(r *discoveryv3.Resource) error {
		return s.Send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: xdstype.ClusterURL, SystemVersionInfo: "v1", Nonce: time.Now().String(), Resources: []*discoveryv3.Resource{r}})
	}
	ttl := durationpb.New(300 * time.Millisecond)
	for first := true; ; {
		select {
		case req, ok := <-reqs:
			if !ok {
				return nil
			}
			switch {
			case first:
				first = false
				if err := send(&discoveryv3.Resource{Name: "c1", Version: "1", Resource: c1, Ttl: ttl}); err != nil {
					return nil
				}
			case slices.Contains(req.GetResourceNamesSubscribe(), "c1"):
				close(l.asked)
				if err := send(&discoveryv3.Resource{Name: "c1", Version: "1", Resource: c1}); err != nil {
					return nil
				}
			}
		case <-l.beat:
			if err := send(&discoveryv3.Resource{Name: "c1", Version: "1", Ttl: ttl}); err != nil {
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// TestClientExpiresAResourceItsUpstreamStopsRefreshingAndAsksForItAgainOnAHeartbeat:
// a resource sent with a TTL and not refreshed within it is no longer
// held; a heartbeat of it coming later (the upstream takes it as held
// still, and would never resend it) makes the client ask for it again.
func TestClientExpiresAResourceItsUpstreamStopsRefreshingAndAsksForItAgainOnAHeartbeat(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	l := &lateBeats{beat: make(chan struct{}), asked: make(chan struct{})}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, l)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	c := run(t, upstream.Options{Addrs: []string{lis.Addr().String()}})
	held := func() bool { _, ok := c.State()[xdstype.ClusterURL]["c1"]; return ok }
	if !eventually(held) {
		t.Fatal("the client never held c1")
	}
	if !eventually(func() bool { return !held() }) {
		t.Fatal("c1, sent with a TTL of 300ms and never refreshed, is still held")
	}
	select {
	case l.beat <- struct{}{}:
	case <-time.After(bound):
		t.Fatal("the upstream's stream is gone")
	}
	select {
	case <-l.asked:
	case <-time.After(bound):
		t.Fatal("after a heartbeat of c1, which it no longer holds, the client did not ask for c1 again")
	}
	if !eventually(held) {
		t.Fatal("c1 sent again, the client does not hold it")
	}
}

// firstRequest keeps the first request of each stream and answers none.
type firstRequest struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	got chan *discoveryv3.DeltaDiscoveryRequest
}

func (f *firstRequest) DeltaAggregatedResources(s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	req, err := s.Recv()
	if err != nil {
		return nil
	}
	select {
	case f.got <- req:
	default:
	}
	<-s.Context().Done()
	return nil
}

// TestClientResumesWithoutClaimingWhatHasATTL: a resumed stream tells the
// upstream the versions it holds, but not of a resource with a TTL, which
// the upstream then sends again at once (else it would be refreshed only
// at the upstream's next heartbeat, after it may have expired here).
func TestClientResumesWithoutClaimingWhatHasATTL(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	f := &firstRequest{got: make(chan *discoveryv3.DeltaDiscoveryRequest, 1)}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	c1, err := anypb.New(xdstest.Cluster("c1"))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := anypb.New(xdstest.Cluster("c2"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, upstream.Options{Addrs: []string{lis.Addr().String()}, Resume: upstream.State{xdstype.ClusterURL: {
		"c1": {Version: "1", Any: c1, TTL: time.Minute},
		"c2": {Version: "2", Any: c2},
	}}})
	select {
	case req := <-f.got:
		if got := req.GetInitialResourceVersions(); len(got) != 1 || got["c2"] != "2" {
			t.Fatalf("the resumed stream claimed %v, want only c2 at 2 (c1 has a TTL)", got)
		}
	case <-time.After(bound):
		t.Fatal("no request came")
	}
}
