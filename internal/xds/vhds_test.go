package xds_test

import (
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const (
	vhds = xdstype.VirtualHostURL
	// vhRC is the route configuration whose virtual hosts Envoy asks for
	// on demand. Its name holds a "/", as an xdstp:// name does: only the
	// alias's last "/" separates the host.
	vhRC = "edge/main"
)

// vhdsRoutes is vhRC, with VHDS over ADS and one inline virtual host.
func vhdsRoutes() *routev3.RouteConfiguration {
	rc := xdstest.Route(vhRC, "a")
	rc.VirtualHosts[0].Domains = []string{"base.example.com"}
	rc.Vhds = &routev3.Vhds{ConfigSource: xdstest.ADS()}
	return rc
}

// vhost is the VHDS virtual host vhRC/name serving domains, routing to
// cluster.
func vhost(name, cluster string, domains ...string) *routev3.VirtualHost {
	vh := xdstest.Route(vhRC+"/"+name, cluster).VirtualHosts[0]
	vh.Domains = domains
	return vh
}

// vhdsWorld: clusters a and b, vhRC, and virtual hosts for
// api.example.com (to a) and *.apps.example.com (to b), plus extra.
func vhdsWorld(extra ...any) []any {
	return append([]any{
		xdstest.Cluster("a"), xdstest.Cluster("b"),
		xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 1002),
		vhdsRoutes(),
		vhost("api", "a", "api.example.com"),
		vhost("wild", "b", "*.apps.example.com"),
	}, extra...)
}

func alias(host string) string { return vhRC + "/" + host }

// vhWant is one resource a VHDS response must carry: found is whether it
// holds a virtual host (under name) or is an alias answered as not found.
type vhWant struct {
	name    string
	aliases []string
	found   bool
}

// wantVHDS checks a VirtualHost delta response exactly: each resource's
// name, aliases, payload (a VirtualHost of that name at the published
// version) or its absence (then the version is the type's set version),
// and removed_resources.
func wantVHDS(t *testing.T, e *env, resp *discoveryv3.DeltaDiscoveryResponse, want []vhWant, removed []string) {
	t.Helper()
	if resp.TypeUrl != vhds {
		t.Fatalf("response of %s, want %s", resp.TypeUrl, vhds)
	}
	// The set the answering server serves: through a relay, the virtual
	// hosts its proxies' aliases brought, not all of the origin's.
	set := e.served.Current().For(xdstest.Node("vhds")).Set(vhds)
	if len(resp.Resources) != len(want) || !slices.Equal(resp.RemovedResources, removed) {
		t.Fatalf("response %s: %d resources %v, removed %v; want %v, removed %v", resp.Nonce, len(resp.Resources), resp.Resources, resp.RemovedResources, want, removed)
	}
	for i, w := range want {
		r := resp.Resources[i]
		if r.Name != w.name || !slices.Equal(r.Aliases, w.aliases) {
			t.Fatalf("resource %d: name %q aliases %v, want %q %v", i, r.Name, r.Aliases, w.name, w.aliases)
		}
		if !w.found {
			if r.Resource != nil || r.Version != set.Version() {
				t.Fatalf("not found %q: resource %v version %q, want none at the set's version %q", w.name, r.Resource, r.Version, set.Version())
			}
			continue
		}
		m, err := r.GetResource().UnmarshalNew()
		if err != nil {
			t.Fatalf("resource %q: %v", r.Name, err)
		}
		vh, ok := m.(*routev3.VirtualHost)
		if !ok || vh.Name != w.name || r.Version != set.Get(w.name).Version {
			t.Fatalf("resource %q holds %T %q at %q, want the VirtualHost at %q", r.Name, m, xdstype.NameOf(m), r.Version, set.Get(w.name).Version)
		}
	}
}

// vhdsStart opens a delta ADS stream subscribed to vhRC's namespace, as
// Envoy's VHDS subscription starts, and ACKs the first answer.
func vhdsStart(t *testing.T, e *env) *xdstest.DeltaStream {
	t.Helper()
	s := e.delta(t, "n1")
	s.Subscribe(vhds, vhRC)
	first := s.RecvType(vhds)
	wantVHDS(t, e, first, nil, nil)
	s.ACK(first)
	return s
}

// The namespace alone sends nothing (the base virtual hosts are the route
// configuration's inline ones) and is never "not found"; the first request
// is answered, empty, so that Envoy's initial fetch completes.
func TestDelta_VHDS_namespace_subscription(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	s := vhdsStart(t, e)
	s.ExpectSilence()
}

func TestDelta_VHDS_alias_resolves_to_matching_vhost(t *testing.T) {
	e := setup(t, vhdsWorld(vhost("exact", "a", "q.apps.example.com"))...)
	s := vhdsStart(t, e)
	s.Subscribe(vhds, alias("api.example.com"))
	wantVHDS(t, e, s.RecvType(vhds), []vhWant{{vhRC + "/api", []string{alias("api.example.com")}, true}}, nil)
	// Suffix wildcards, case-insensitively; two aliases of one virtual
	// host go out as one resource carrying both; an exact domain beats a
	// wildcard.
	s.Subscribe(vhds, alias("X.apps.example.com"), alias("y.apps.example.com"), alias("q.apps.example.com"))
	wantVHDS(t, e, s.RecvType(vhds), []vhWant{
		{vhRC + "/exact", []string{alias("q.apps.example.com")}, true},
		{vhRC + "/wild", []string{alias("X.apps.example.com"), alias("y.apps.example.com")}, true},
	}, nil)
	// A virtual host sent for a new alias carries those it already served.
	s.Subscribe(vhds, alias("w.apps.example.com"))
	wantVHDS(t, e, s.RecvType(vhds), []vhWant{
		{vhRC + "/wild", []string{alias("X.apps.example.com"), alias("w.apps.example.com"), alias("y.apps.example.com")}, true},
	}, nil)

	// The per-type service (DeltaVirtualHosts) answers alike, namespace
	// and alias in one first request.
	ps := xdstest.OpenDeltaType(t, e.conn, e.srv.Registry.Lookup(vhds), xdstest.Node("n2"))
	ps.Send(&discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{vhRC, alias("api.example.com")}})
	wantVHDS(t, e, ps.Recv(), []vhWant{{vhRC + "/api", []string{alias("api.example.com")}, true}}, nil)
}

// An alias no virtual host serves is answered with an empty resource named
// by the alias, once; a virtual host that later serves it is sent with it.
func TestDelta_VHDS_not_found_answers_empty_aliased_resource(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	s := vhdsStart(t, e)
	lost := alias("nowhere.test")
	s.Subscribe(vhds, lost)
	resp := s.RecvType(vhds)
	wantVHDS(t, e, resp, []vhWant{{lost, []string{lost}, false}}, nil)
	s.ACK(resp)
	s.ExpectSilence()

	e.srv.Publish(t, vhdsWorld(vhost("late", "a", "nowhere.test"))...)
	resp = s.RecvType(vhds)
	wantVHDS(t, e, resp, []vhWant{{vhRC + "/late", []string{lost}, true}}, nil)
	s.ACK(resp)
	s.ExpectSilence()
}

// A virtual host the client holds is pushed when it changes, with the
// aliases it serves; one the client does not hold is not sent.
func TestDelta_VHDS_vhost_change_pushed_with_alias(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	s := vhdsStart(t, e)
	s.Subscribe(vhds, alias("api.example.com"))
	first := s.RecvType(vhds)
	s.ACK(first)

	api, wild := vhost("api", "b", "api.example.com"), vhost("wild", "a", "*.apps.example.com")
	world := vhdsWorld()
	e.srv.Publish(t, append(world[:len(world)-2], api, wild)...)
	resp := s.RecvType(vhds)
	wantVHDS(t, e, resp, []vhWant{{vhRC + "/api", []string{alias("api.example.com")}, true}}, nil)
	if resp.Resources[0].Version == first.Resources[0].Version {
		t.Fatal("the changed virtual host kept its version")
	}
	s.ACK(resp)
	s.ExpectSilence()
}

// A virtual host deleted is removed by its name, and the aliases it served
// are answered as not found in the same response.
func TestDelta_VHDS_vhost_removed(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	s := vhdsStart(t, e)
	host := alias("api.example.com")
	s.Subscribe(vhds, host)
	s.ACK(s.RecvType(vhds))

	world := vhdsWorld()
	e.srv.Publish(t, append(world[:len(world)-2], world[len(world)-1])...)
	resp := s.RecvType(vhds)
	wantVHDS(t, e, resp, []vhWant{{host, []string{host}, false}}, []string{vhRC + "/api"})
	s.ACK(resp)
	s.ExpectSilence()
}

// Two streams whose aliases resolve to the same virtual hosts each get
// their own aliases: a response carrying the whole set is not the shared
// encoding of another stream's.
func TestDelta_VHDS_aliases_are_each_streams_own(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	for _, c := range []struct{ node, wild string }{{"n1", "x.apps.example.com"}, {"n2", "z.apps.example.com"}} {
		s := xdstest.OpenDeltaADS(t, e.conn, xdstest.Node(c.node))
		s.Subscribe(vhds, vhRC, alias("api.example.com"), alias(c.wild))
		wantVHDS(t, e, s.RecvType(vhds), []vhWant{
			{vhRC + "/api", []string{alias("api.example.com")}, true},
			{vhRC + "/wild", []string{alias(c.wild)}, true},
		}, nil)
	}
}

// An alias subscribed again is answered again (X29), found or not.
func TestDelta_VHDS_alias_subscribed_again_answered_again(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	s := vhdsStart(t, e)
	lost, api := alias("nowhere.test"), alias("api.example.com")
	s.Subscribe(vhds, lost, api)
	s.ACK(s.RecvType(vhds))
	s.Subscribe(vhds, lost, api)
	wantVHDS(t, e, s.RecvType(vhds), []vhWant{{vhRC + "/api", []string{api}, true}, {lost, []string{lost}, false}}, nil)
}

// Make-before-break: a virtual host naming a cluster the client subscribes
// to but does not have yet waits for it, as a route does (X37, X39), both
// when it changes and when an alias first resolves to it.
func TestDelta_VHDS_vhost_waits_for_its_cluster(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	s := vhdsStart(t, e)
	s.Subscribe(cds)
	s.ACK(s.RecvType(cds))
	api, fresh := alias("api.example.com"), alias("new.example.com")
	s.Subscribe(vhds, api)
	s.ACK(s.RecvType(vhds))

	world := vhdsWorld()
	e.srv.Publish(t, append(world[:len(world)-2], vhost("api", "c", "api.example.com"), world[len(world)-1],
		vhost("new", "c", "new.example.com"), xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
	c := s.RecvType(cds)
	wantDelta(t, c, []string{"c"}, nil)
	s.ExpectSilence() // the changed virtual host waits for the cluster's ACK
	s.Subscribe(vhds, fresh)
	held := s.RecvType(vhds)
	wantVHDS(t, e, held, nil, nil) // answered, but what it resolves to waits too
	s.ACK(held)
	s.ACK(c)
	wantVHDS(t, e, s.RecvType(vhds), []vhWant{{vhRC + "/api", []string{api}, true}, {vhRC + "/new", []string{fresh}, true}}, nil)
}

// Make-before-break on removal: a cluster deleted with the virtual host
// naming it stays until the client ACKs the virtual host's removal.
func TestDelta_VHDS_vhost_removed_before_its_cluster(t *testing.T) {
	e := setup(t, vhdsWorld(vhost("c", "c", "c.example.com"), xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
	s := vhdsStart(t, e)
	s.Subscribe(cds)
	s.ACK(s.RecvType(cds))
	host := alias("c.example.com")
	s.Subscribe(vhds, host)
	s.ACK(s.RecvType(vhds))

	e.srv.Publish(t, vhdsWorld()...)
	gone := s.RecvType(vhds)
	wantVHDS(t, e, gone, []vhWant{{host, []string{host}, false}}, []string{vhRC + "/c"})
	s.ExpectSilence() // the cluster stays while the client may still route to it
	s.ACK(gone)
	wantDelta(t, s.RecvType(cds), nil, []string{"c"})
}

// A reconnecting client lists the virtual hosts it holds (X35) and
// subscribes its namespace and aliases again: each alias is answered again
// (its on-demand callback waits for it), and a virtual host deleted
// meanwhile is removed.
func TestDelta_VHDS_reconnect_with_initial_versions(t *testing.T) {
	e := setup(t, vhdsWorld()...)
	snap := e.srv.Publisher.Current().For(nil)
	api := alias("api.example.com")
	s := e.delta(t, "n1")
	s.Send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl:                 vhds,
		ResourceNamesSubscribe:  []string{vhRC, api},
		InitialResourceVersions: map[string]string{vhRC + "/api": snap.Set(vhds).Get(vhRC + "/api").Version, vhRC + "/old": "v0"},
	})
	wantVHDS(t, e, s.RecvType(vhds), []vhWant{{vhRC + "/api", []string{api}, true}}, []string{vhRC + "/old"})
}

// A name is a namespace while a route configuration has it, else an alias:
// a change to the route configurations alone (the virtual hosts
// unchanged) answers a name that became an alias, even for a client
// settled at those virtual hosts.
func TestDelta_VHDS_namespace_gone_answers_the_alias(t *testing.T) {
	other := xdstest.Route(alias("other"), "a")
	e := setup(t, vhdsWorld(vhost("any", "a", "other"), other)...)
	s := vhdsStart(t, e)
	s.Subscribe(cds)
	s.ACK(s.RecvType(cds))
	s.Subscribe(vhds, alias("other"))
	resp := s.RecvType(vhds)
	wantVHDS(t, e, resp, nil, nil) // a namespace: nothing
	s.ACK(resp)

	// A push of something else settles the client's virtual hosts.
	slow := xdstest.Cluster("a")
	slow.ConnectTimeout.Seconds = 9
	world := vhdsWorld(vhost("any", "a", "other"), other)
	world[0] = slow // vhdsWorld's cluster a
	e.srv.Publish(t, world...)
	c := s.RecvType(cds)
	wantDelta(t, c, []string{"a"}, nil)
	s.ACK(c)

	e.srv.Publish(t, world[:len(world)-1]...) // without the route configuration "other"
	wantVHDS(t, e, s.RecvType(vhds), []vhWant{{vhRC + "/any", []string{alias("other")}, true}}, nil)
}

// The port is part of the host unless the route configuration says
// ignore_port_in_host_matching, as in Envoy's own matching; an IPv6
// address is not cut at its colons.
func TestDelta_VHDS_port_ignored_when_the_route_configuration_says_so(t *testing.T) {
	api, v6 := alias("api.example.com:8443"), alias("[::1]")
	for _, ignore := range []bool{false, true} {
		rc := vhdsRoutes()
		rc.IgnorePortInHostMatching = ignore
		world := vhdsWorld(vhost("v6", "a", "[::1]"))
		world[4] = rc // vhdsWorld's route configuration
		e := setup(t, world...)
		s := vhdsStart(t, e)
		s.Subscribe(vhds, api, v6)
		want := []vhWant{{api, []string{api}, false}, {vhRC + "/v6", []string{v6}, true}}
		if ignore {
			want[0] = vhWant{vhRC + "/api", []string{api}, true}
		}
		wantVHDS(t, e, s.RecvType(vhds), want, nil)
	}
}
