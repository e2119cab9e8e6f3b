package rollout

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// fleetEDS is a one-group fleet: cluster "a" with the given timeout (the
// config) and its assignment on the given port (the endpoints).
func fleetEDS(t *testing.T, timeout time.Duration, port uint32) *fleet.Fleet {
	t.Helper()
	reg := xdstype.New()
	c := &clusterv3.Cluster{Name: "a", ConnectTimeout: durationpb.New(timeout), ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "a", Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}},
	}}}
	s, err := snapshot.Build(reg, []xdstype.Resource{
		{Type: reg.Lookup(xdstype.ClusterURL), Name: "a", Message: c},
		{Type: reg.Lookup(xdstype.EndpointURL), Name: "a", Message: cla},
	})
	if err != nil {
		t.Fatal(err)
	}
	return fleet.NewGroupedFleet(nodegroup.Groups{{Name: "edge", Default: true, Rollout: policy}}, []*snapshot.Snapshot{s})
}

// Endpoints are not rolled out: a change of endpoints alone starts no
// rollout; during one it leaves the stage and its bake as they are, and
// every node, in the stage or not, gets the current endpoints.
func TestEndpointsAreNotRolledOut(t *testing.T) {
	clk, pub := newClock(), fleet.NewPublisher()
	c, err := New(Options{Publisher: pub, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	c.Publish(fleetEDS(t, time.Second, 1), files("1"))
	c.Publish(fleetEDS(t, time.Second, 2), files("1"))
	if s := c.Status(); len(s) != 0 {
		t.Fatalf("a change of endpoints alone started a rollout: %+v", s)
	}
	c.Publish(fleetEDS(t, 2*time.Second, 2), files("2"))
	before := c.Status()
	if len(before) != 1 || before[0].Stage != 1 {
		t.Fatalf("a config change: rollouts %+v, want one at stage 1", before)
	}
	clk.Advance(30 * time.Second)
	c.Publish(fleetEDS(t, 2*time.Second, 3), files("2"))
	after := c.Status()
	if len(after) != 1 || after[0] != before[0] {
		t.Fatalf("endpoints changed during the rollout: %+v, want it unchanged %+v", after, before)
	}
	in, out := stageNodes()
	for _, node := range []string{in, out} {
		g := pub.Current().Group(&corev3.Node{Id: node}, nil)
		cla := g.Snapshot.Set(xdstype.EndpointURL).Get("a").Message.(*endpointv3.ClusterLoadAssignment)
		port := cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
		cl := g.Snapshot.Set(xdstype.ClusterURL).Get("a").Message.(*clusterv3.Cluster)
		wantTimeout := time.Second
		if node == in {
			wantTimeout = 2 * time.Second
		}
		if port != 3 || cl.GetConnectTimeout().AsDuration() != wantTimeout {
			t.Fatalf("node %s (in stage: %v) runs timeout %v with endpoint port %d, want %v and the current port 3", node, node == in, cl.GetConnectTimeout().AsDuration(), port, wantTimeout)
		}
	}
}
