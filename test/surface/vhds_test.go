package surface

import (
	"fmt"
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// vhdsRouteConfig is the route configuration "edge", whose virtual hosts
// Envoy may fetch on demand when vhds is set.
func vhdsRouteConfig(vhds bool) string {
	source := ""
	if vhds {
		source = "\n  vhds: { config_source: { ads: {}, resource_api_version: V3 } }"
	}
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: edge%s
  virtual_hosts:
  - name: www
    domains: [www.example.com]
    routes:
    - match: { prefix: / }
      direct_response: { status: 200, body: { inline_string: www } }
`, source)
}

// vhdsHost is the VHDS virtual host edge/api, answering body.
func vhdsHost(body string) string {
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.route.v3.VirtualHost
  name: edge/api
  domains: [api.example.com]
  routes:
  - match: { prefix: / }
    direct_response: { status: 200, body: { inline_string: %q } }
`, body)
}

// vhdsEntry is one resource of a VHDS response as the test sees it: the
// body its virtual host answers, "" for an alias answered as not found.
type vhdsEntry struct {
	aliases []string
	body    string
}

func vhdsEntries(t *testing.T, resp *discoveryv3.DeltaDiscoveryResponse) map[string]vhdsEntry {
	t.Helper()
	if resp.GetNonce() == "" || resp.GetControlPlane().GetIdentifier() != identifier {
		t.Errorf("nonce %q, control plane %v", resp.GetNonce(), resp.GetControlPlane())
	}
	out := map[string]vhdsEntry{}
	for _, r := range resp.GetResources() {
		e := vhdsEntry{aliases: r.GetAliases()}
		if r.GetResource() != nil {
			var vh routev3.VirtualHost
			if err := r.GetResource().UnmarshalTo(&vh); err != nil || vh.GetName() != r.GetName() {
				t.Fatalf("resource %q holds %q (%v)", r.GetName(), vh.GetName(), err)
			}
			e.body = vh.GetRoutes()[0].GetDirectResponse().GetBody().GetInlineString()
		}
		out[r.GetName()] = e
	}
	return out
}

func wantEntries(t *testing.T, got map[string]vhdsEntry, want map[string]vhdsEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("resources %v, want %v", got, want)
	}
	for n, w := range want {
		if g, ok := got[n]; !ok || g.body != w.body || !slices.Equal(g.aliases, w.aliases) {
			t.Fatalf("resource %q: %+v, want %+v (all: %v)", n, g, w, got)
		}
	}
}

// The whole daemon serves VHDS on demand from its config file: an alias is
// answered with the virtual host serving its host, or as not found; a
// change is pushed with the alias; a config that breaks VHDS is refused
// while the last good one keeps serving; a deletion is removed.
func TestVHDS_daemon_on_demand(t *testing.T) {
	p := start(t, config(vhdsRouteConfig(true), vhdsHost("v1")))
	st := xdstest.OpenDeltaADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
	st.Subscribe(xdstype.VirtualHostURL, "edge")
	first := st.RecvType(xdstype.VirtualHostURL)
	wantEntries(t, vhdsEntries(t, first), nil)
	st.ACK(first)

	api, none := "edge/api.example.com", "edge/none.example.com"
	st.Subscribe(xdstype.VirtualHostURL, api, none)
	resp := st.RecvType(xdstype.VirtualHostURL)
	wantEntries(t, vhdsEntries(t, resp), map[string]vhdsEntry{"edge/api": {[]string{api}, "v1"}, none: {[]string{none}, ""}})
	st.ACK(resp)

	p.write(t, config(vhdsRouteConfig(true), vhdsHost("v2")))
	resp = st.RecvType(xdstype.VirtualHostURL)
	wantEntries(t, vhdsEntries(t, resp), map[string]vhdsEntry{"edge/api": {[]string{api}, "v2"}})
	st.ACK(resp)

	p.write(t, config(vhdsRouteConfig(false), vhdsHost("v3")))
	refusedWith(t, p, "VirtualHost", "edge/api", "name", `RouteConfiguration "edge" has no vhds`)
	st.ExpectSilence()

	p.write(t, config(vhdsRouteConfig(true)))
	resp = st.RecvType(xdstype.VirtualHostURL)
	wantEntries(t, vhdsEntries(t, resp), map[string]vhdsEntry{api: {[]string{api}, ""}})
	if !slices.Equal(resp.GetRemovedResources(), []string{"edge/api"}) {
		t.Fatalf("removed_resources %v, want [edge/api]", resp.GetRemovedResources())
	}
	st.ACK(resp)
}
