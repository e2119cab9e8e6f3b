package snapshot_test

import (
	"errors"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// typedInputs makes an xdstype.Resource of each message, typed by its registry entry,
// from the file a.yaml (so the diagnostics name a file).
func typedInputs(t *testing.T, reg *xdstype.Registry, msgs ...proto.Message) []xdstype.Resource {
	t.Helper()
	var out []xdstype.Resource
	for i, m := range msgs {
		typ := reg.Lookup("type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()))
		if typ == nil {
			t.Fatalf("no registered type for %T", m)
		}
		out = append(out, xdstype.Resource{Type: typ, Name: xdstype.NameOf(m), Message: m, File: "a.yaml", Line: i + 1})
	}
	return out
}

// refused builds msgs and returns the diagnostics Build refused them with,
// failing the test if it built a snapshot.
func refused(t *testing.T, msgs ...proto.Message) diag.List {
	t.Helper()
	reg := xdstype.New()
	s, err := snapshot.Build(reg, typedInputs(t, reg, msgs...))
	if err == nil {
		t.Fatalf("Build made a snapshot (version %s) of an invalid set; it must refuse it", s.Version())
	}
	var l diag.List
	if !errors.As(err, &l) {
		t.Fatalf("Build's error is %T (%v), not a diag.List", err, err)
	}
	return l
}

// wantDiags compares the diagnostics with want, field by field.
func wantDiags(t *testing.T, got diag.List, want ...diag.Diagnostic) {
	t.Helper()
	if diff := cmp.Diff(diag.List(want), got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

// hcmWithoutStatPrefix is an HTTP connection manager that breaks a
// constraint of its own (stat_prefix is required), packed in an Any as a
// listener carries it: ValidateAll on the listener does not look inside.
func hcmWithoutStatPrefix(t *testing.T, route string) *anypb.Any {
	t.Helper()
	var hcm hcmv3.HttpConnectionManager
	if err := xdstest.HCM(route).UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	hcm.StatPrefix = ""
	a, err := anypb.New(&hcm)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Every snapshot is built through Build, so the checks in it are what
// stands between a bad resource and every proxy: the compile golden tests
// catch them only for what the compiler emits, not for raw resources, file
// sources or anything else that builds a snapshot.
func TestBuildRefuses(t *testing.T) {
	t.Run("proto_constraint_of_the_resource", func(t *testing.T) {
		e := xdstest.Endpoints("a", 1)
		e.Endpoints[0].LoadBalancingWeight.Value = 0 // must be at least 1
		got := refused(t, xdstest.Cluster("a"), e)
		wantDiags(t, got, diag.Diagnostic{File: "a.yaml", Line: 2, Type: "ClusterLoadAssignment", Name: "a", Field: "endpoints[0].load_balancing_weight",
			Message: "value must be greater than or equal to 1"})
	})

	t.Run("proto_constraint_inside_a_nested_Any", func(t *testing.T) {
		l := xdstest.APIListener("l1", "r1")
		l.ApiListener.ApiListener = hcmWithoutStatPrefix(t, "r1")
		got := refused(t, l, xdstest.Route("r1", "a"), xdstest.Cluster("a"), xdstest.Endpoints("a", 1))
		wantDiags(t, got, diag.Diagnostic{File: "a.yaml", Line: 1, Type: "Listener", Name: "l1", Field: "api_listener.api_listener.stat_prefix",
			Message: "value length must be at least 1 runes"})
	})

	t.Run("Any_that_does_not_decode", func(t *testing.T) {
		l := xdstest.APIListener("l1", "r1")
		l.ApiListener.ApiListener.Value = []byte{0xff, 0xff, 0xff}
		got := refused(t, l, xdstest.Route("r1", "a"), xdstest.Cluster("a"), xdstest.Endpoints("a", 1))
		if len(got) != 1 || got[0].Name != "l1" || got[0].Field != "api_listener.api_listener" {
			t.Fatalf("diagnostics %v: want one for listener l1, field api_listener.api_listener", got)
		}
	})

	t.Run("dangling_references", func(t *testing.T) {
		// The listener names a route configuration that is not in the set,
		// and the route configuration a cluster that is not.
		got := refused(t, xdstest.APIListener("l1", "r1"), xdstest.Route("r2", "missing"))
		got.Sort()
		wantDiags(t, got,
			diag.Diagnostic{File: "a.yaml", Line: 1, Type: "Listener", Name: "l1", Field: "api_listener.api_listener.rds.route_config_name",
				Message: `names RouteConfiguration "r1", which does not exist`},
			diag.Diagnostic{File: "a.yaml", Line: 2, Type: "RouteConfiguration", Name: "r2", Field: "virtual_hosts[0].routes[0].route.cluster",
				Message: `names Cluster "missing", which does not exist`},
		)
	})

	t.Run("duplicate_names", func(t *testing.T) {
		got := refused(t, xdstest.Cluster("a"), xdstest.Cluster("a"), xdstest.Endpoints("a", 1))
		wantDiags(t, got, diag.Diagnostic{File: "a.yaml", Line: 2, Type: "Cluster", Name: "a", Field: "name",
			Message: "duplicate name: already defined at a.yaml:1"})
	})

	t.Run("valid_set_builds", func(t *testing.T) {
		reg := xdstype.New()
		in := typedInputs(t, reg, xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"), xdstest.Cluster("a"), xdstest.Endpoints("a", 1))
		s, err := snapshot.Build(reg, in)
		if err != nil {
			t.Fatalf("Build refused a valid set: %v", err)
		}
		if n := s.Set(xdstype.ListenerURL).Len() + s.Set(xdstype.RouteURL).Len() + s.Set(xdstype.ClusterURL).Len() + s.Set(xdstype.EndpointURL).Len(); n != 4 {
			t.Fatalf("snapshot holds %d resources, want 4", n)
		}
	})
}

// A resource's PrecedeType is the one type all it must wait for are of,
// read at build time: make-before-break's shared check relies on it
// instead of reading a route's every cluster on every stream.
func TestPrecedeType(t *testing.T) {
	reg := xdstype.New()
	two := xdstest.Route("two", "a")
	two.VirtualHosts = append(two.VirtualHosts, xdstest.Route("x", "b").VirtualHosts...)
	two.VirtualHosts[1].Name, two.VirtualHosts[1].Domains = "other", []string{"other.example"}
	s, err := snapshot.Build(reg, typedInputs(t, reg, xdstest.Cluster("a"), xdstest.Endpoints("a"), xdstest.Cluster("b"), xdstest.Endpoints("b"), two))
	if err != nil {
		t.Fatal(err)
	}
	route := s.Set(xdstype.RouteURL).Get("two")
	if len(route.Precede) != 2 || route.PrecedeType() != xdstype.ClusterURL {
		t.Errorf("route naming clusters a and b: Precede %v, PrecedeType %q, want two refs of %s", route.Precede, route.PrecedeType(), xdstype.ClusterURL)
	}
	if c := s.Set(xdstype.ClusterURL).Get("a"); c.PrecedeType() != "" {
		t.Errorf("a cluster naming nothing to wait for: PrecedeType %q, want empty", c.PrecedeType())
	}
}
