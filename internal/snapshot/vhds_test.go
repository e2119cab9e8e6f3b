package snapshot_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// vhdsRoutes is a route configuration whose virtual hosts Envoy may ask for
// by VHDS (vhds set), with one inline virtual host serving domains.
func vhdsRoutes(name string, vhds bool, domains ...string) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{Name: "inline", Domains: domains}}}
	if vhds {
		rc.Vhds = &routev3.Vhds{ConfigSource: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}
	}
	return rc
}

func virtualHost(name string, domains ...string) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: domains}
}

func TestVHDS_virtual_hosts_checked_before_publish(t *testing.T) {
	got := refused(t,
		vhdsRoutes("main", true, "www.example.com"),
		vhdsRoutes("plain", false, "*"),
		virtualHost("nohost", "a"),
		virtualHost("missing/a", "a"),
		virtualHost("plain/a", "a"),
		virtualHost("main/b", "api.example.com", "WWW.example.com"),
		virtualHost("main/c", "API.example.com"),
		&routev3.VirtualHost{Name: "main/d", Domains: []string{"d"}, Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "gone"}}},
		}}},
	)
	d := func(line int, name, field, msg string) diag.Diagnostic {
		return diag.Diagnostic{File: "a.yaml", Line: line, Type: "VirtualHost", Name: name, Field: field, Message: msg}
	}
	wantDiags(t, got,
		d(3, "nohost", "name", `a VirtualHost is named "<route configuration>/<virtual host>" (VHDS): "nohost" has no route configuration before a "/"`),
		d(4, "missing/a", "name", `names RouteConfiguration "missing" (the part before the last "/"), which does not exist`),
		d(5, "plain/a", "name", `RouteConfiguration "plain" has no vhds: Envoy never asks for its virtual hosts`),
		d(6, "main/b", "domains[1]", `domain "WWW.example.com" is served by RouteConfiguration "main"'s virtual host "inline" too: Envoy rejects a route configuration with a duplicate domain`),
		d(7, "main/c", "domains[0]", `domain "API.example.com" is served by VirtualHost "main/b" too: Envoy rejects a route configuration with a duplicate domain`),
		d(8, "main/d", "routes[0].route.cluster", `names Cluster "gone", which does not exist`),
	)
}

// A scoped group naming a route configuration with vhds gets the virtual
// hosts of its namespace (nothing names them), and only those.
func TestVHDS_closure_brings_the_namespace(t *testing.T) {
	reg := xdstype.New()
	s, err := snapshot.Build(reg, typedInputs(t, reg,
		vhdsRoutes("main", true, "www.example.com"),
		vhdsRoutes("main/x", true, "x"),
		vhdsRoutes("other", true, "o"),
		virtualHost("main/a", "a.example.com"),
		virtualHost("main/x/y", "y"),
		virtualHost("other/b", "b.example.com"),
	))
	if err != nil {
		t.Fatal(err)
	}
	got := snapshot.Closure(s, snapshot.Names{xdstype.RouteURL: {"main": true}})
	want := snapshot.Names{xdstype.RouteURL: {"main": true}, xdstype.VirtualHostURL: {"main/a": true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("closure (-want +got):\n%s", diff)
	}
}
