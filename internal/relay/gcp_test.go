package relay_test

import (
	"context"
	"net"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	gcpserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// byCluster is go-control-plane's node hash keyed by the node's cluster:
// the relay's upstream node for key K carries cluster K.
type byCluster struct{}

func (byCluster) ID(n *corev3.Node) string { return n.GetCluster() }

// startGCP serves go-control-plane's SnapshotCache on loopback with one
// STATIC cluster per node cluster, named after it.
func startGCP(t *testing.T, clusters ...string) string {
	t.Helper()
	c := cache.NewSnapshotCache(false, byCluster{}, nil)
	for _, name := range clusters {
		cl := &clusterv3.Cluster{
			Name: "svc-" + name, ConnectTimeout: durationpb.New(1e9),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		}
		snap, err := cache.NewSnapshot("v1", map[resource.Type][]types.Resource{resource.ClusterType: {cl}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetSnapshot(context.Background(), name, snap); err != nil {
			t.Fatal(err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, gcpserver.NewServer(ctx, c, nil))
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	t.Cleanup(func() { cancel(); g.Stop(); <-done })
	return lis.Addr().String()
}

// TestRelayInFrontOfGoControlPlane: with go-control-plane's SnapshotCache
// as the upstream, keyed by cluster, each cluster's proxies get their
// cluster's snapshot through the relay, one upstream stream per cluster.
func TestRelayInFrontOfGoControlPlane(t *testing.T) {
	addr := startGCP(t, "east", "west")
	rd := startRelay(t, []string{addr}, "", daemon.RelayOptions{Key: "{cluster}"})
	conn := xdstest.Dial(t, rd.xds)
	for _, cluster := range []string{"east", "west", "east"} {
		s := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "proxy-of-" + cluster, Cluster: cluster})
		s.Subscribe(xdstype.ClusterURL, "*")
		resp := s.RecvType(xdstype.ClusterURL)
		if len(resp.Resources) != 1 || resp.Resources[0].Name != "svc-"+cluster {
			t.Fatalf("a proxy of cluster %s got %v, want svc-%s", cluster, resp.Resources, cluster)
		}
	}
	keys := rd.r.Keys()
	if len(keys) != 2 || keys[0].Key != "east" || keys[0].Proxies != 2 || keys[1].Key != "west" || keys[0].Streams != 1 || keys[1].Streams != 1 {
		t.Fatalf("relay keys %+v, want east (2 proxies) and west, one upstream stream each", keys)
	}
}
