package snapshot

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const faultURL = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"

func extensionConfig(t *testing.T, name string, a *anypb.Any) *Resource {
	t.Helper()
	return &Resource{Name: name, Message: &corev3.TypedExtensionConfig{Name: name, TypedConfig: a}}
}

// typedStruct encodes a TypedStruct carrying inner as its type_url, by
// hand: the container's Go package is not a dependency.
func typedStruct(url, inner string) *anypb.Any {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, inner)
	return &anypb.Any{TypeUrl: url, Value: b}
}

// References from a filter's config_discovery: the named extension config
// must exist unless the filter applies its default without warming, and
// its type must be one the filter accepts (Envoy compares message names,
// a TypedStruct by the type it carries).
func TestRefProblems(t *testing.T) {
	reg := xdstype.New()
	fault, err := anypb.New(&faultv3.HTTPFault{})
	if err != nil {
		t.Fatal(err)
	}
	rbac, err := anypb.New(&rbacv3.RBAC{})
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]map[string]*Resource{xdstype.ExtensionConfURL: {
		"fault":       extensionConfig(t, "fault", fault),
		"rbac":        extensionConfig(t, "rbac", rbac),
		"xds-struct":  extensionConfig(t, "xds-struct", typedStruct("type.googleapis.com/xds.type.v3.TypedStruct", "other.prefix/envoy.extensions.filters.http.fault.v3.HTTPFault")),
		"udpa-struct": extensionConfig(t, "udpa-struct", typedStruct("type.googleapis.com/udpa.type.v1.TypedStruct", "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC")),
	}}
	ref := func(name string, optional bool) xdstype.Ref {
		return xdstype.Ref{TypeURL: xdstype.ExtensionConfURL, Name: name, Field: "http_filters[0].name",
			Accept: []string{faultURL}, AcceptField: "http_filters[0].config_discovery.type_urls", Optional: optional}
	}
	in := &xdstype.Resource{Type: reg.Lookup(xdstype.ListenerURL), Name: "l", File: "a.yaml", Line: 3}
	d := func(field, msg string) diag.Diagnostic {
		return diag.Diagnostic{File: "a.yaml", Line: 3, Type: "Listener", Name: "l", Field: field, Message: msg}
	}
	cases := []struct {
		name string
		ref  xdstype.Ref
		want diag.List
	}{
		{"accepted type", ref("fault", false), nil},
		{"accepted type in an xds TypedStruct", ref("xds-struct", false), nil},
		{"missing", ref("nope", false), diag.List{d("http_filters[0].name", `names TypedExtensionConfig "nope", which does not exist`)}},
		{"missing but applied from the default without warming", ref("nope", true), nil},
		{"other type", ref("rbac", false), diag.List{d("http_filters[0].config_discovery.type_urls",
			`accepts `+faultURL+`, but TypedExtensionConfig "rbac" holds a envoy.extensions.filters.http.rbac.v3.RBAC; Envoy would reject it`)}},
		{"other type in a udpa TypedStruct, optional or not", ref("udpa-struct", true), diag.List{d("http_filters[0].config_discovery.type_urls",
			`accepts `+faultURL+`, but TypedExtensionConfig "udpa-struct" holds a envoy.extensions.filters.http.rbac.v3.RBAC; Envoy would reject it`)}},
		{"no constraint", xdstype.Ref{TypeURL: xdstype.ExtensionConfURL, Name: "rbac", Field: "f"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := refProblems(reg, in, []xdstype.Ref{c.ref}, byType)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// A filter's config_discovery is refused where Envoy refuses the listener:
// a default applied without warming but missing, or a default of a type
// the filter does not accept (inside an HCM's typed_config too).
func TestExtensionSourceChecks(t *testing.T) {
	reg := xdstype.New()
	fault, err := anypb.New(&faultv3.HTTPFault{})
	if err != nil {
		t.Fatal(err)
	}
	rbac, err := anypb.New(&rbacv3.RBAC{})
	if err != nil {
		t.Fatal(err)
	}
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	cd := func(dflt *anypb.Any, withoutWarming bool) *corev3.ExtensionConfigSource {
		return &corev3.ExtensionConfigSource{ConfigSource: ads, TypeUrls: []string{faultURL}, DefaultConfig: dflt, ApplyDefaultConfigWithoutWarming: withoutWarming}
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "h",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "f", ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{ConfigDiscovery: cd(rbac, false)}},
			{Name: "f", ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{ConfigDiscovery: cd(fault, true)}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	l := &listenerv3.Listener{Name: "l",
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "f", ConfigType: &listenerv3.ListenerFilter_ConfigDiscovery{ConfigDiscovery: cd(nil, true)}}},
		FilterChains:    []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}},
	}
	_, err = Build(reg, []xdstype.Resource{
		{Type: reg.Lookup(xdstype.ExtensionConfURL), Name: "f", Message: &corev3.TypedExtensionConfig{Name: "f", TypedConfig: fault}},
		{Type: reg.Lookup(xdstype.ListenerURL), Name: "l", Message: l},
	})
	list, _ := err.(diag.List)
	var got []string
	for _, d := range list {
		got = append(got, d.Field+": "+d.Message)
	}
	want := []string{
		"filter_chains[0].filters[0].typed_config.http_filters[0].config_discovery.default_config: is a envoy.extensions.filters.http.rbac.v3.RBAC, not one of type_urls (" + faultURL + "); Envoy rejects it",
		"listener_filters[0].config_discovery.apply_default_config_without_warming: set without a default_config; Envoy rejects it",
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// A runtime layer holding a list or a null is refused, naming the runtime
// key as Envoy does; nested objects are key prefixes, fractional percents
// and empty objects are values.
func TestRuntimeLayerChecks(t *testing.T) {
	reg := xdstype.New()
	layer, err := structpb.NewStruct(map[string]any{
		"ok":   1,
		"flag": true,
		"pct":  map[string]any{"numerator": 5, "denominator": "HUNDRED"},
		"none": map[string]any{},
		"deep": map[string]any{"er": map[string]any{"list": []any{1}, "fine": "x"}},
		"nil":  nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.RuntimeURL), Name: "r", Message: &runtimev3.Runtime{Name: "r", Layer: layer}}})
	list, _ := err.(diag.List)
	var got []string
	for _, d := range list {
		got = append(got, d.Field)
	}
	if want := []string{"layer.deep.er.list", "layer.nil"}; !slices.Equal(got, want) {
		t.Errorf("refused fields %v, want %v (%v)", got, want, err)
	}
}
