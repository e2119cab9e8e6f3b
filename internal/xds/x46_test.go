package xds_test

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// Federated names (TP1, gRPC A47): an authority, the type, an id and
// context parameters, stored with the parameters sorted by key.
const (
	fedCluster   = "xdstp://pylon.example/envoy.config.cluster.v3.Cluster/greeter?a=1&b=2"
	fedUnsorted  = "xdstp://pylon.example/envoy.config.cluster.v3.Cluster/greeter?b=2&a=1"
	fedOtherVals = "xdstp://pylon.example/envoy.config.cluster.v3.Cluster/greeter?a=1&b=3"
	// An xdstp:// cluster's assignment has a name of its own type (the
	// snapshot refuses a type segment that is not the resource's).
	fedEDS         = "xdstp://pylon.example/envoy.config.endpoint.v3.ClusterLoadAssignment/greeter?a=1&b=2"
	fedEDSUnsorted = "xdstp://pylon.example/envoy.config.endpoint.v3.ClusterLoadAssignment/greeter?b=2&a=1"
)

// fedClusterNamed is a cluster named name whose assignment is fedEDS.
func fedClusterNamed(name string) *clusterv3.Cluster {
	c := xdstest.Cluster(name)
	c.EdsClusterConfig.ServiceName = fedEDS
	return c
}

func fedWorld() []any {
	return with(fedClusterNamed(fedCluster), xdstest.Endpoints(fedEDS, 2001))
}

// TestX46_context_parameters_in_any_order: a name whose context parameters
// come in another order is the same resource (TP1 normalization); the
// response names it as stored, sorted, which clients match modulo order
// (grpc-go sorts every name it reads).
func TestX46_context_parameters_in_any_order(t *testing.T) {
	e := setup(t, fedWorld()...)
	s := e.ads(t, "grpc")
	s.Request(cds, fedUnsorted)
	r := s.RecvType(cds)
	wantNames(t, r, fedCluster)
	s.ACK(r, fedUnsorted)
	// The ACK repeats the subscription in the client's order: the same
	// subscription, nothing owed.
	s.ExpectSilence()

	s.Request(eds, fedEDSUnsorted)
	wantNames(t, s.RecvType(eds), fedEDS)
}

// TestX46_names_are_opaque_otherwise: other parameter values, or another
// authority, name another resource; none is guessed.
func TestX46_names_are_opaque_otherwise(t *testing.T) {
	e := setup(t, fedWorld()...)
	s := e.ads(t, "grpc")
	s.Request(cds, fedOtherVals, "xdstp://other.example/envoy.config.cluster.v3.Cluster/greeter?a=1&b=2")
	wantNames(t, s.RecvType(cds))
}

// TestX46_delta_context_parameters_in_any_order: the same on delta, for
// subscribing, unsubscribing and initial_resource_versions (X35: a client
// presenting the version it holds under either order is not resent it).
func TestX46_delta_context_parameters_in_any_order(t *testing.T) {
	e := setup(t, fedWorld()...)
	d := xdstest.OpenDeltaADS(t, e.conn, xdstest.Node("envoy"))
	d.Subscribe(cds, fedUnsorted)
	r := d.RecvType(cds)
	if len(r.Resources) != 1 || r.Resources[0].Name != fedCluster {
		t.Fatalf("delta response %v, want %s", r.Resources, fedCluster)
	}
	d.ACK(r)
	version := r.Resources[0].Version

	d.Unsubscribe(cds, fedUnsorted)
	d.ExpectSilence()
	d.Subscribe(cds, fedCluster)
	r = d.RecvType(cds)
	if len(r.Resources) != 1 || r.Resources[0].Name != fedCluster {
		t.Fatalf("after unsubscribing in the other order: %v, want %s again", r.Resources, fedCluster)
	}

	d2 := xdstest.OpenDeltaADS(t, e.conn, xdstest.Node("envoy-2"))
	d2.Send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl:                 cds,
		ResourceNamesSubscribe:  []string{fedUnsorted},
		InitialResourceVersions: map[string]string{fedUnsorted: version},
	})
	r = d2.RecvType(cds)
	if len(r.Resources) != 0 || len(r.RemovedResources) != 0 {
		t.Fatalf("a reconnect holding %s at its version was sent %v, removed %v; want nothing", fedUnsorted, r.Resources, r.RemovedResources)
	}
	if slices.Contains(r.RemovedResources, fedUnsorted) {
		t.Fatal("the unsorted name reported as not found")
	}
}
