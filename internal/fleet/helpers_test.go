package fleet_test

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func cluster(name string, timeout time.Duration) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(timeout),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
	}
}

// build is a snapshot of the clusters.
func build(t testing.TB, reg *xdstype.Registry, clusters ...*clusterv3.Cluster) *snapshot.Snapshot {
	t.Helper()
	var in []xdstype.Resource
	for _, c := range clusters {
		in = append(in, xdstype.Resource{Type: reg.Lookup(xdstype.ClusterURL), Name: c.GetName(), Message: c})
	}
	s, err := snapshot.Build(reg, in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
