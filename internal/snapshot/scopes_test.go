package snapshot_test

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func scopeWithKey(name string, keys ...string) *routev3.ScopedRouteConfiguration {
	k := &routev3.ScopedRouteConfiguration_Key{}
	for _, s := range keys {
		k.Fragments = append(k.Fragments, &routev3.ScopedRouteConfiguration_Key_Fragment{Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: s}})
	}
	return &routev3.ScopedRouteConfiguration{Name: name, RouteConfigurationName: "r", Key: k}
}

// Two scopes with one key in a snapshot are refused once, naming the
// later scope's key and the earlier scope; keys that only concatenate
// alike do not clash.
func TestScopeKeyClashes(t *testing.T) {
	reg := xdstype.New()
	msgs := []proto.Message{
		&routev3.RouteConfiguration{Name: "r"},
		scopeWithKey("a", "x", "y"), scopeWithKey("b", "x", "y"),
		scopeWithKey("c", "ab", "c"), scopeWithKey("d", "a", "bc"),
	}
	inputs := typedInputs(t, reg, msgs...)
	s, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatal(err)
	}
	where := func(name string) *xdstype.Resource {
		for i := range inputs {
			if inputs[i].Name == name && inputs[i].Type.URL == xdstype.ScopedRouteURL {
				return &inputs[i]
			}
		}
		return nil
	}
	reported := map[[2]string]bool{}
	want := diag.List{{File: "a.yaml", Line: 3, Type: "ScopedRouteConfiguration", Name: "b", Field: "key",
		Message: `the same key as ScopedRouteConfiguration "a" (a.yaml:2) in group "edge"; Envoy would reject the SRDS update`}}
	if diff := cmp.Diff(want, snapshot.ScopeKeyClashes(s, "edge", where, reported)); diff != "" {
		t.Errorf("clashes (-want +got):\n%s", diff)
	}
	if got := snapshot.ScopeKeyClashes(s, "other", where, reported); len(got) != 0 {
		t.Errorf("a clash reported twice: %v", got)
	}
}
