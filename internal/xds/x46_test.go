package xds_test

import (
	"slices"
	"strings"
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

// Glob collections (TP1): the members of mesh/*?region=x are the clusters
// one segment below mesh/ with exactly the parameters region=x.
const (
	fedCDS   = "xdstp://pylon.example/envoy.config.cluster.v3.Cluster/"
	fedGlob  = fedCDS + "mesh/*?region=x"
	memberA  = fedCDS + "mesh/a?region=x"
	memberB  = fedCDS + "mesh/b?region=x"
	memberG  = fedCDS + "mesh/g?region=x"
	otherReg = fedCDS + "mesh/c?region=y"
	tooDeep  = fedCDS + "mesh/deep/d?region=x"
	noParams = fedCDS + "mesh/f"
	otherAut = "xdstp://other.example/envoy.config.cluster.v3.Cluster/mesh/e?region=x"
)

// fedMember is an xdstp:// cluster with its assignment, named by the same
// id under the assignment's type.
func fedMember(name string, port uint32) []any {
	eds := strings.Replace(name, "envoy.config.cluster.v3.Cluster", "envoy.config.endpoint.v3.ClusterLoadAssignment", 1)
	c := xdstest.Cluster(name)
	c.EdsClusterConfig.ServiceName = eds
	return []any{c, xdstest.Endpoints(eds, port)}
}

// globWorld is base plus clusters in and around the collection.
func globWorld(names ...string) []any {
	out := base()
	for i, n := range names {
		out = append(out, fedMember(n, uint32(3000+i))...)
	}
	return out
}

// deltaNames is what a delta response sends and removes, sorted.
func deltaNames(r *discoveryv3.DeltaDiscoveryResponse) (sent, removed []string) {
	for _, res := range r.Resources {
		sent = append(sent, res.Name)
	}
	slices.Sort(sent)
	removed = slices.Sorted(slices.Values(r.RemovedResources))
	return sent, removed
}

// TestX46_sotw_glob_collection_of_clusters: a SotW subscription to a glob
// gets the collection's members, kept current as clusters come and go; no
// other authority, parameters or depth is a member.
func TestX46_sotw_glob_collection_of_clusters(t *testing.T) {
	e := setup(t, globWorld(memberA, memberB, otherReg, tooDeep, noParams, otherAut)...)
	s := e.ads(t, "grpc")
	s.Request(cds, fedGlob)
	r := s.RecvType(cds)
	wantNames(t, r, memberA, memberB)
	s.ACK(r, fedGlob)
	s.ExpectSilence()

	e.srv.Publish(t, globWorld(memberA, memberG, otherReg, tooDeep, noParams, otherAut)...)
	r = s.RecvType(cds)
	// Full state: b's absence deletes it (X22).
	wantNames(t, r, memberA, memberG)
	s.ACK(r, fedGlob)
	// Another region's cluster changes nothing the client holds; a new
	// member is sent with the rest.
	e.srv.Publish(t, globWorld(memberA, memberG, fedCDS+"mesh/b?region=xx", otherAut)...)
	s.ExpectSilence()
	e.srv.Publish(t, globWorld(memberA, memberG, fedCDS+"mesh/bx?region=x", otherAut)...)
	r = s.RecvType(cds)
	wantNames(t, r, memberA, fedCDS+"mesh/bx?region=x", memberG)
}

// TestX46_sotw_glob_with_a_member_named_and_unsorted: a glob whose
// parameters come unsorted is the same collection, and a member also named
// explicitly is sent once (X8); a listener glob works alike.
func TestX46_sotw_glob_with_a_member_named_and_unsorted(t *testing.T) {
	const (
		ldsGlob = "xdstp://pylon.example/envoy.config.listener.v3.Listener/*"
		l1      = "xdstp://pylon.example/envoy.config.listener.v3.Listener/l1"
	)
	world := append(globWorld(memberA+"&zone=1", memberB+"&zone=1", memberG), xdstest.APIListener(l1, "r1"))
	e := setup(t, world...)
	s := e.ads(t, "grpc")
	s.Request(cds, fedCDS+"mesh/*?zone=1&region=x", memberA+"&zone=1")
	r := s.RecvType(cds)
	if len(r.Resources) != 2 {
		t.Fatalf("response holds %d resources, want 2 (each member once)", len(r.Resources))
	}
	wantNames(t, r, memberA+"&zone=1", memberB+"&zone=1")
	s.Request(lds, ldsGlob)
	wantNames(t, s.RecvType(lds), l1)
}

// TestX46_delta_glob_collection_of_clusters: a delta subscription to a
// glob gets the members, never the glob itself as "not found" (X33 is for
// resources), additions and removals as the set changes (X34); after
// unsubscribing the glob, nothing of it is sent.
func TestX46_delta_glob_collection_of_clusters(t *testing.T) {
	e := setup(t, globWorld(memberA, memberB, otherReg, tooDeep, noParams, otherAut)...)
	d := xdstest.OpenDeltaADS(t, e.conn, xdstest.Node("grpc"))
	missing := fedCDS + "mesh/zz?region=x"
	d.Subscribe(cds, fedGlob, missing)
	r := d.RecvType(cds)
	sent, removed := deltaNames(r)
	if !slices.Equal(sent, []string{memberA, memberB}) || !slices.Equal(removed, []string{missing}) {
		t.Fatalf("delta response sent %v, removed %v; want %v and [%s] (not found)", sent, removed, []string{memberA, memberB}, missing)
	}
	d.ACK(r)
	d.Unsubscribe(cds, missing)

	e.srv.Publish(t, globWorld(memberA, memberG, otherReg, tooDeep, noParams, otherAut)...)
	r = d.RecvType(cds)
	sent, removed = deltaNames(r)
	if !slices.Equal(sent, []string{memberG}) || !slices.Equal(removed, []string{memberB}) {
		t.Fatalf("after b left and g came: sent %v, removed %v; want [%s] and [%s]", sent, removed, memberG, memberB)
	}
	d.ACK(r)

	// Named as well, then unnamed: a is still had through the glob.
	d.Subscribe(cds, memberA)
	r = d.RecvType(cds)
	if sent, removed = deltaNames(r); !slices.Equal(sent, []string{memberA}) || len(removed) != 0 {
		t.Fatalf("subscribing to member a as well: sent %v, removed %v; want [%s] once (X29, X8)", sent, removed, memberA)
	}
	d.ACK(r)
	d.Unsubscribe(cds, memberA)
	d.ExpectSilence()
	e.srv.Publish(t, globWorld(memberA, memberG, memberB)...)
	r = d.RecvType(cds)
	if sent, removed = deltaNames(r); !slices.Equal(sent, []string{memberB}) || len(removed) != 0 {
		t.Fatalf("after b came back: sent %v, removed %v; want [%s]", sent, removed, memberB)
	}
	d.ACK(r)

	// Subscribing to the glob again while holding it: its members are
	// answered (X29), though the client has them.
	d.Subscribe(cds, fedGlob)
	r = d.RecvType(cds)
	if sent, removed = deltaNames(r); !slices.Equal(sent, []string{memberA, memberB, memberG}) || len(removed) != 0 {
		t.Fatalf("subscribing to the glob it has: sent %v, removed %v; want [%s %s %s]", sent, removed, memberA, memberB, memberG)
	}
	d.ACK(r)

	d.Unsubscribe(cds, fedGlob)
	d.ExpectSilence()
	e.srv.Publish(t, globWorld(memberA, memberG)...)
	d.ExpectSilence()
	// The client dropped the members with the glob: subscribing again
	// sends them again.
	d.Subscribe(cds, fedGlob)
	r = d.RecvType(cds)
	if sent, removed = deltaNames(r); !slices.Equal(sent, []string{memberA, memberG}) || len(removed) != 0 {
		t.Fatalf("subscribing to the glob again: sent %v, removed %v; want [%s %s]", sent, removed, memberA, memberG)
	}
}
