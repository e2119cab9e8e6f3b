package surface

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// refusedWith waits for the change to be refused and checks that one of
// the refusal's diagnostics names the resource, the field and the message.
func refusedWith(t *testing.T, p *pylon, kind, name, field, message string) {
	t.Helper()
	r := p.refusal(t)
	for _, d := range r.Diagnostics {
		if d.Type == kind && d.Name == name && d.Field == field && strings.Contains(d.Message, message) {
			if d.File != p.path || d.Line == 0 {
				t.Errorf("diagnostic names %s:%d, want the config file and a line", d.File, d.Line)
			}
			return
		}
	}
	t.Fatalf("refused with %v; want %s %q: %s: %s", r.Diagnostics, kind, name, field, message)
}

// stillServes checks that a new stream gets the previous config's version
// of typeURL: a refused change leaves the last good config serving.
func stillServes(t *testing.T, p *pylon, typeURL, version string) {
	t.Helper()
	st := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("late"))
	st.Request(typeURL)
	if got := st.RecvType(typeURL).GetVersionInfo(); got != version {
		t.Errorf("a new stream gets %s version %s, want the last good %s", typeURL, got, version)
	}
}

// A listener naming an ECDS filter config that does not exist is refused
// with the filter's field named; the previous config keeps serving.
func TestECDS_missing_config_refused(t *testing.T) {
	p := start(t, config(extension("f", 1), listener("l", 10001, "f")))
	st := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
	st.Request(xdstype.ListenerURL)
	resp := st.RecvType(xdstype.ListenerURL)
	st.ACK(resp)

	p.write(t, config(extension("f", 1), listener("l", 10001, "f", "missing")))
	refusedWith(t, p, "Listener", "l", "filter_chains[0].filters[0].typed_config.http_filters[1].name",
		`names TypedExtensionConfig "missing", which does not exist`)
	st.ExpectSilence()
	stillServes(t, p, xdstype.ListenerURL, resp.GetVersionInfo())
}

// A scope naming a route configuration that does not exist is refused
// with route_configuration_name named; the previous config keeps serving.
func TestSRDS_missing_route_refused(t *testing.T) {
	p := start(t, config(scope("s1", "a", "r1"), route("r1", "one"), listener("l", 10001)))
	st := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
	st.Request(xdstype.ScopedRouteURL)
	resp := st.RecvType(xdstype.ScopedRouteURL)
	st.ACK(resp)

	p.write(t, config(scope("s1", "a", "r1"), scope("s2", "b", "nope"), route("r1", "one"), listener("l", 10001)))
	refusedWith(t, p, "ScopedRouteConfiguration", "s2", "route_configuration_name",
		`names RouteConfiguration "nope", which does not exist`)
	st.ExpectSilence()
	stillServes(t, p, xdstype.ScopedRouteURL, resp.GetVersionInfo())
}

// An ECDS config of a type the filter does not accept (type_urls) is
// refused, naming the filter's type_urls: Envoy would reject it.
func TestECDS_type_mismatch_refused(t *testing.T) {
	p := start(t, config(extension("f", 1), listener("l", 10001, "f")))
	before := p.status(t).Version
	p.write(t, config(rbacExtension("f"), listener("l", 10001, "f")))
	refusedWith(t, p, "Listener", "l", "filter_chains[0].filters[0].typed_config.http_filters[0].config_discovery.type_urls",
		`TypedExtensionConfig "f" holds a envoy.extensions.filters.http.rbac.v3.RBAC`)
	if v := p.status(t).Version; v != before {
		t.Errorf("serving %s after a refused change, want %s", v, before)
	}
}

// inlineScopes is a listener whose HTTP connection manager holds its
// scopes inline, each naming a route configuration fetched from Pylon.
func inlineScopes(name string, routes ...string) string {
	var scopes strings.Builder
	for i, r := range routes {
		fmt.Fprintf(&scopes, `
            - name: s%d
              route_configuration_name: %s
              key: { fragments: [{ string_key: k%d }] }`, i, r, i)
	}
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: %s
  address: { socket_address: { address: 127.0.0.1, port_value: 10002 } }
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: %[1]s
        scoped_routes:
          name: %[1]s
          scope_key_builder: { fragments: [{ header_value_extractor: { name: x-tenant } }] }
          rds_config_source: { ads: {}, resource_api_version: V3 }
          scoped_route_configurations_list:
            scoped_route_configurations:%[2]s
        http_filters:
        - name: envoy.filters.http.router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
`, name, scopes.String())
}

// An HTTP connection manager whose inline scope names a route
// configuration that does not exist is refused with the scope's field.
func TestSRDS_inline_scope_missing_route_refused(t *testing.T) {
	p := start(t, config(route("r1", "one"), inlineScopes("l", "r1")))
	st := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
	st.Request(xdstype.ListenerURL)
	resp := st.RecvType(xdstype.ListenerURL)
	st.ACK(resp)

	p.write(t, config(route("r1", "one"), inlineScopes("l", "r1", "nope")))
	refusedWith(t, p, "Listener", "l", "filter_chains[0].filters[0].typed_config.scoped_routes.scoped_route_configurations_list.scoped_route_configurations[1].route_configuration_name",
		`names RouteConfiguration "nope", which does not exist`)
	st.ExpectSilence()
	stillServes(t, p, xdstype.ListenerURL, resp.GetVersionInfo())
}

// A filter whose default applies without warming does not need its
// extension config: Envoy uses the default until one arrives, so a
// listener naming a missing one is accepted and served.
func TestECDS_missing_config_with_default_accepted(t *testing.T) {
	p := start(t, config(route("r1", "one")))
	before := p.status(t).Version
	l := strings.Replace(listener("l", 10001, "f"), "type_urls: ["+faultURL+"]",
		"type_urls: ["+faultURL+"]\n            default_config: { \"@type\": "+faultURL+" }\n            apply_default_config_without_warming: true", 1)
	p.write(t, config(route("r1", "one"), l))
	if !eventually(func() bool { return p.status(t).Version != before }) {
		t.Fatalf("not published: %+v", p.status(t).Refused)
	}
	st := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
	st.Request(xdstype.ListenerURL)
	if got := sortedKeys(decode(t, xdstype.ListenerURL, st.RecvType(xdstype.ListenerURL).GetResources())); !slices.Equal(got, []string{"l"}) {
		t.Errorf("listeners %v, want [l]", got)
	}
}
