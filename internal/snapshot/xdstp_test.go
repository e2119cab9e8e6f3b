package snapshot_test

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const (
	cdsType = "envoy.config.cluster.v3.Cluster"
	edsType = "envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// fedCluster is a cluster named name whose load assignment is eds: an
// xdstp:// cluster's assignment has a name of its own type.
func fedCluster(name, eds string) *clusterv3.Cluster {
	c := xdstest.Cluster(name)
	c.EdsClusterConfig.ServiceName = eds
	return c
}

// TestX46_xdstp_names_refused_unless_canonical: a resource's xdstp:// name
// is a key clients ask for in canonical form (context parameters sorted by
// key, TP1 and gRPC A47), so anything else is refused before publish, the
// resource and its name field named.
func TestX46_xdstp_names_refused_unless_canonical(t *testing.T) {
	for _, c := range []struct{ name, why, message string }{
		{"unsorted", "xdstp://a.example/" + cdsType + "/c?b=2&a=1",
			`xdstp:// name "xdstp://a.example/` + cdsType + `/c?b=2&a=1" is not canonical: context parameters must be sorted by key, as clients ask for them ("xdstp://a.example/` + cdsType + `/c?a=1&b=2")`},
		{"wrong type", "xdstp://a.example/envoy.config.listener.v3.Listener/c",
			`xdstp:// name "xdstp://a.example/envoy.config.listener.v3.Listener/c" has type segment "envoy.config.listener.v3.Listener", but the resource is a ` + cdsType + `: name it xdstp://a.example/` + cdsType + `/c, and refer to it by that name`},
		{"no id", "xdstp://a.example/" + cdsType,
			`xdstp:// name "xdstp://a.example/` + cdsType + `" has no id after its type "` + cdsType + `" (xdstp://authority/type/id)`},
		{"no type", "xdstp://a.example",
			`xdstp:// name "xdstp://a.example" has no resource type segment (xdstp://authority/type/id)`},
		{"glob", "xdstp://a.example/" + cdsType + "/ns/*",
			`xdstp:// name "xdstp://a.example/` + cdsType + `/ns/*" is a glob collection, not a resource's name`},
		{"repeated parameter", "xdstp://a.example/" + cdsType + "/c?a=1&a=2",
			`xdstp:// name "xdstp://a.example/` + cdsType + `/c?a=1&a=2" repeats context parameter "a"`},
		{"empty parameter", "xdstp://a.example/" + cdsType + "/c?",
			`xdstp:// name "xdstp://a.example/` + cdsType + `/c?" has context parameter ""; want key=value with a non-empty key, both of letters, digits and -._~`},
		{"keys clients order differently", "xdstp://a.example/" + cdsType + "/c?zone=a&zone2=b",
			`xdstp:// name "xdstp://a.example/` + cdsType + `/c?zone=a&zone2=b" has context parameter keys "zone" and "zone2", which grpc-java orders otherwise than grpc-go and Envoy (it sorts key=value, they sort keys): rename one so neither is the other plus '-', '.' or a digit`},
		{"directive", "xdstp://a.example/" + cdsType + "/c#alt=x",
			`xdstp:// name "xdstp://a.example/` + cdsType + `/c#alt=x" has a processing directive (#alt=x); a resource's own name carries none`},
		{"escaped", "xdstp://a.example/" + cdsType + "/a b",
			`xdstp:// name "xdstp://a.example/` + cdsType + `/a b" has characters clients percent-encode in its authority or id; use letters, digits and -._~ (and / between id segments)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := refused(t, fedCluster(c.why, "eds"), xdstest.Endpoints("eds", 1))
			wantDiags(t, got, diag.Diagnostic{File: "a.yaml", Line: 1, Type: "Cluster", Name: c.why, Field: "name", Message: c.message})
		})
	}
}

// TestX46_canonical_xdstp_names_accepted: canonical names, with or without
// an authority or parameters, and plain names build.
func TestX46_canonical_xdstp_names_accepted(t *testing.T) {
	reg := xdstype.New()
	names := []string{
		"xdstp://a.example/" + cdsType + "/ns/c?a=1&b=2",
		"xdstp://a.example/" + cdsType + "/c?zone=a&zone_b=b&zoneb=c",
		"xdstp:///" + cdsType + "/c",
		"xdstp://a.example:443/" + cdsType + "/c?k=",
		"plain",
	}
	var msgs []any
	for _, n := range names {
		msgs = append(msgs, fedCluster(n, "eds-"+n))
	}
	msgs = append(msgs, xdstest.Endpoints("xdstp://a.example/"+edsType+"/eds?a=1&b=2", 1))
	for _, n := range names {
		msgs = append(msgs, xdstest.Endpoints("eds-"+n, 1))
	}
	msgs[0].(*clusterv3.Cluster).EdsClusterConfig.ServiceName = "xdstp://a.example/" + edsType + "/eds?a=1&b=2"
	if s := xdstest.Snapshot(t, reg, msgs...); s.Set(xdstype.ClusterURL).Len() != len(names) {
		t.Fatalf("built %d clusters, want %d", s.Set(xdstype.ClusterURL).Len(), len(names))
	}
	if msg := snapshot.XdstpProblem("xdstp://a.example/"+cdsType+"/c?a=1&b=2", cdsType); msg != "" {
		t.Fatalf("canonical name refused: %s", msg)
	}
}
