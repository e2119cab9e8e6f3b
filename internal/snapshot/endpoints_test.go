package snapshot_test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func assignment(cluster string, port uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}},
	}}}
}

// buildMixed builds clusters and assignments (each by its own type).
func buildMixed(t *testing.T, reg *xdstype.Registry, msgs ...proto.Message) *snapshot.Snapshot {
	t.Helper()
	var in []xdstype.Resource
	for _, m := range msgs {
		typ := reg.Lookup(xdstype.ClusterURL)
		if _, ok := m.(*endpointv3.ClusterLoadAssignment); ok {
			typ = reg.Lookup(xdstype.EndpointURL)
		}
		in = append(in, xdstype.Resource{Type: typ, Name: xdstype.NameOf(m), Message: m})
	}
	s, err := snapshot.Build(reg, in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A change of endpoints alone leaves the config version; any other change
// moves it.
func TestConfigVersionLeavesOutEndpoints(t *testing.T) {
	reg := xdstype.New()
	a := buildMixed(t, reg, cluster("web", time.Second), assignment("web", 1))
	b := buildMixed(t, reg, cluster("web", time.Second), assignment("web", 2))
	c := buildMixed(t, reg, cluster("web", 2*time.Second), assignment("web", 1))
	if a.Version() == b.Version() || a.ConfigVersion() != b.ConfigVersion() {
		t.Fatalf("endpoints alone: versions %s %s, config versions %s %s", a.Version(), b.Version(), a.ConfigVersion(), b.ConfigVersion())
	}
	if a.ConfigVersion() == c.ConfigVersion() {
		t.Fatal("a cluster change left the config version")
	}
}

// The previous snapshot of a rollout takes the current assignments, and
// keeps its own for the clusters the new one dropped; the rest is its own,
// shared.
func TestWithEndpointsOf(t *testing.T) {
	reg := xdstype.New()
	prev := buildMixed(t, reg, cluster("web", time.Second), cluster("old", time.Second), assignment("web", 1), assignment("old", 3))
	cur := buildMixed(t, reg, cluster("web", 2*time.Second), assignment("web", 2))
	got := prev.WithEndpointsOf(cur)
	eds := got.Set(xdstype.EndpointURL)
	if eds.Get("web") != cur.Set(xdstype.EndpointURL).Get("web") || eds.Get("old") != prev.Set(xdstype.EndpointURL).Get("old") {
		t.Fatalf("assignments %v: want web from the current snapshot and old kept", eds.Names())
	}
	if got.Set(xdstype.ClusterURL) != prev.Set(xdstype.ClusterURL) || got.ConfigVersion() != prev.ConfigVersion() {
		t.Fatal("the clusters are not the previous snapshot's, shared")
	}
	if got.Version() == prev.Version() {
		t.Fatal("the version did not move with the assignments")
	}
	if same := prev.WithEndpointsOf(prev); same != prev {
		t.Fatal("the same assignments made a new snapshot")
	}
}
