package xds_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// firstRequest sends what a reconnecting Envoy or gRPC client sends first
// for a type on its new stream: its names and the version of the last
// response it accepted, with no nonce (nothing was received on this
// stream). Later requests of the type carry that version too.
func firstRequest(s *xdstest.Stream, typeURL, version string, names ...string) {
	s.Version[typeURL] = version
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, VersionInfo: version, ResourceNames: names})
}

// fetch subscribes s to names of typeURL, receives the answer and ACKs it.
func fetch(t *testing.T, s *xdstest.Stream, typeURL string, names ...string) *discoveryv3.DiscoveryResponse {
	t.Helper()
	s.Request(typeURL, names...)
	r := s.RecvType(typeURL)
	s.ACK(r, names...)
	return r
}

// hangUp closes s, a stream of node, and waits until the server has seen
// it end, so that a publish after it reaches only the new stream.
func hangUp(t *testing.T, r *recorder, s *xdstest.Stream, node string) {
	t.Helper()
	isClosed := func(e status.Event) bool { return e.Kind == status.StreamClosed && e.NodeID() == node }
	n := r.count(isClosed)
	s.Close()
	deadline := time.After(xdstest.Timeout)
	for r.count(isClosed) <= n {
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("the server did not see %s's stream end within %v", node, xdstest.Timeout)
		}
	}
}

// sentOf counts the non-heartbeat responses of typeURL sent to node.
func sentOf(r *recorder, node, typeURL string) int {
	return r.count(func(e status.Event) bool {
		return e.Kind == status.ResponseSent && !e.Heartbeat && e.NodeID() == node && e.TypeURL == typeURL
	})
}

// sparedOf counts the resends of typeURL spared to node.
func sparedOf(r *recorder, node, typeURL string) int {
	return r.count(func(e status.Event) bool {
		return e.Kind == status.ResponseSpared && e.NodeID() == node && e.TypeURL == typeURL
	})
}

// greeting receives the one response a stream whose resends were all
// spared still gets (X24, greet.go): of typeURL, at version (what the
// client holds), with want resources, each one the client holds as held
// (a response of it, by name) says.
func greeting(t *testing.T, s *xdstest.Stream, typeURL, version string, want int, held *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryResponse {
	t.Helper()
	r := s.Recv()
	if r.TypeUrl != typeURL || r.VersionInfo != version || len(r.Resources) != want || r.Nonce == "" {
		t.Fatalf("first message: %s at %q with %d resources (nonce %q); want %s at %q with %d", r.TypeUrl, r.VersionInfo, len(r.Resources), r.Nonce, typeURL, version, want)
	}
	if held == nil {
		return r
	}
	for _, a := range r.Resources {
		if !slices.ContainsFunc(held.Resources, func(b *anypb.Any) bool { return proto.Equal(a, b) }) {
			t.Fatalf("first message carries %s, which the client did not hold", a.TypeUrl)
		}
	}
	return r
}

// greetings counts the greetings sent to node.
func greetings(r *recorder, node string) int {
	return r.count(func(e status.Event) bool {
		return e.Kind == status.ResponseSent && e.Greeting && e.NodeID() == node
	})
}

// bodySize is the size of a response without its per-stream fields: what
// a spared resend of it saves.
func bodySize(r *discoveryv3.DiscoveryResponse) int {
	b := proto.Clone(r).(*discoveryv3.DiscoveryResponse)
	b.Nonce, b.ControlPlane = "", nil
	return proto.Size(b)
}

// changedCluster is base() with cluster a's connect timeout changed: the
// clusters change, their assignments do not.
func changedCluster() []any {
	w := base()
	c := xdstest.Cluster("a")
	c.ConnectTimeout.Seconds = 7
	w[0] = c
	return w
}

// TestSotWReconnect covers X24: a client reconnecting with the version of
// what it holds is sent nothing it already has, and everything else.
func TestSotWReconnect(t *testing.T) {
	t.Run("X24_current_versions_spared_then_changes_sent", func(t *testing.T) {
		var srv *xdstest.Server
		obs := newTracked(func() *xdstest.Server { return srv })
		srv = xdstest.Start(t, xds.Options{Observer: obs})
		srv.Publish(t, base()...)
		conn := xdstest.Dial(t, srv.Addr)
		s := xdstest.OpenADS(t, conn, xdstest.Node("envoy-1"))
		c := fetch(t, s, cds)
		l := fetch(t, s, lds)
		obs.acked(t, "envoy-1", l.Nonce)
		hangUp(t, obs.recorder, s, "envoy-1")

		s2 := xdstest.OpenADS(t, conn, xdstest.Node("envoy-1"))
		firstRequest(s2, cds, c.VersionInfo)
		firstRequest(s2, lds, l.VersionInfo)
		// Only full-state types, all spared: the smaller set is resent
		// whole, once, as the stream's first message.
		small := c
		if bodySize(l) < bodySize(c) {
			small = l
		}
		g := greeting(t, s2, small.TypeUrl, small.VersionInfo, len(small.Resources), small)
		s2.ACK(g)
		s2.ExpectSilence()
		for _, want := range []*discoveryv3.DiscoveryResponse{c, l} {
			ev := obs.wait(t, func(e status.Event) bool { return e.Kind == status.ResponseSpared && e.TypeURL == want.TypeUrl })
			if ev.Version != want.VersionInfo || ev.Resources != len(want.Resources) || ev.Bytes != bodySize(want) || len(ev.Sent) != len(want.Resources) {
				t.Fatalf("spared %s: version %q, %d resources (%d held), %d bytes; want %q, %d, %d", want.TypeUrl, ev.Version, ev.Resources, len(ev.Sent), ev.Bytes, want.VersionInfo, len(want.Resources), bodySize(want))
			}
			for i, m := range ev.Sent {
				got, err := want.Resources[i].UnmarshalNew()
				if err != nil || !proto.Equal(got, m) {
					t.Fatalf("spared %s: holds %v, the response held %v (%v)", want.TypeUrl, m, got, err)
				}
			}
			if st := obs.state("envoy-1", want.TypeUrl); st != status.Synced {
				t.Fatalf("%s is %s after a spared resend, want %s", want.TypeUrl, st, status.Synced)
			}
			wantSent := 1
			if want == small {
				wantSent = 2 // and the greeting
			}
			if n := sentOf(obs.recorder, "envoy-1", want.TypeUrl); n != wantSent {
				t.Fatalf("%d responses of %s sent to envoy-1 in all, want %d", n, want.TypeUrl, wantSent)
			}
		}

		// The next change goes out as usual, from what the client holds.
		srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
		r := s2.RecvType(cds)
		wantNames(t, r, "a", "b", "c")
		if want := srv.Publisher.Current().For(nil).Set(cds).Version(); r.VersionInfo != want || r.Nonce == "" {
			t.Fatalf("CDS after the change: version %q nonce %q, want %q and a nonce", r.VersionInfo, r.Nonce, want)
		}
		s2.ACK(r)
		obs.wait(t, func(e status.Event) bool {
			return e.Kind == status.RequestACK && e.TypeURL == cds && e.Version == r.VersionInfo && e.Nonce == r.Nonce
		})
		if st := obs.state("envoy-1", cds); st != status.Synced {
			t.Fatalf("CDS is %s after ACKing the change", st)
		}
		s2.ExpectSilence() // the listeners did not change
	})

	t.Run("X24_per_type_stream_spared", func(t *testing.T) {
		// A per-resource type's stream is spared all but one resource,
		// sent unchanged as the stream's one message.
		e := setup(t, with(xdstest.Runtime("flag", "fault.abort", 100), xdstest.Runtime("flag-2", "fault.delay", 50))...)
		typ := e.srv.Registry.Lookup(rtds)
		s := xdstest.OpenType(t, e.conn, typ, xdstest.Node("split"))
		held := fetch(t, s, rtds, "flag", "flag-2")
		hangUp(t, e.rec, s, "split")
		s2 := xdstest.OpenType(t, e.conn, typ, xdstest.Node("split"))
		firstRequest(s2, rtds, held.VersionInfo, "flag", "flag-2")
		g := greeting(t, s2, rtds, held.VersionInfo, 1, held)
		s2.ACK(g, "flag", "flag-2")
		e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.ResponseSpared && ev.Version == held.VersionInfo })
		// A change proves the loop plans from the adopted state: only
		// the change is sent.
		e.srv.Publish(t, with(xdstest.Runtime("flag", "fault.abort", 100), xdstest.Runtime("flag-2", "fault.delay", 60))...)
		wantNames(t, s2.RecvType(rtds), "flag-2")

		// A Listener or Cluster stream has no cheaper message: its
		// first request is answered in full, at the version it holds.
		ctyp := e.srv.Registry.Lookup(cds)
		c1 := xdstest.OpenType(t, e.conn, ctyp, xdstest.Node("split-cds"))
		c := fetch(t, c1, cds)
		hangUp(t, e.rec, c1, "split-cds")
		c2 := xdstest.OpenType(t, e.conn, ctyp, xdstest.Node("split-cds"))
		firstRequest(c2, cds, c.VersionInfo)
		r := c2.RecvType(cds)
		if r.VersionInfo != c.VersionInfo || !proto.Equal(&discoveryv3.DiscoveryResponse{Resources: r.Resources}, &discoveryv3.DiscoveryResponse{Resources: c.Resources}) {
			t.Fatalf("per-type CDS on reconnect: %q %v, want the held %q %v", r.VersionInfo, names(t, r), c.VersionInfo, names(t, c))
		}
		if n := sparedOf(e.rec, "split-cds", cds); n != 0 {
			t.Fatalf("per-type CDS spared %d times, want 0", n)
		}
	})

	t.Run("X24_older_or_doubtful_version_full_resend", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		v1 := fetch(t, s, cds).VersionInfo
		hangUp(t, e.rec, s, "n1")
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
		v2 := e.srv.Publisher.Current().For(nil).Set(cds).Version()

		for name, req := range map[string]*discoveryv3.DiscoveryRequest{
			"older version": {TypeUrl: cds, VersionInfo: v1},
			"garbage":       {TypeUrl: cds, VersionInfo: "garbage"},
			// The current version, but a nonce (not a reconnect's first
			// request) or error_detail (the client rejected something and
			// may hold part of it): not trusted.
			"with a nonce":        {TypeUrl: cds, VersionInfo: v2, ResponseNonce: "1"},
			"with error_detail":   {TypeUrl: cds, VersionInfo: v2, ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bad"}},
			"current, for contra": {TypeUrl: cds, VersionInfo: v2},
		} {
			s := e.ads(t, "n-"+name)
			s.Send(req)
			if name == "current, for contra" {
				s.ExpectSilence()
				continue
			}
			r := s.RecvType(cds)
			wantNames(t, r, "a", "b", "c")
			if r.VersionInfo != v2 {
				t.Fatalf("%s: resent at %q, want %q", name, r.VersionInfo, v2)
			}
		}
		if n := sparedOf(e.rec, "n-current, for contra", cds); n != 1 {
			t.Fatalf("the current version spared %d times, want 1", n)
		}
	})

	t.Run("X24_names_added_since_the_version_are_sent", func(t *testing.T) {
		// Envoy adds cluster b, asks for assignments a and b at the
		// version it holds of a alone, and the stream dies before the
		// answer: on the new stream it must get b.
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		va := fetch(t, s, eds, "a").VersionInfo
		s.Request(eds, "a", "b")
		hangUp(t, e.rec, s, "n1")
		s2 := e.ads(t, "n1")
		firstRequest(s2, eds, va, "a", "b")
		r := s2.RecvType(eds)
		wantNames(t, r, "a", "b")
		if want := e.srv.Publisher.Current().For(nil).Set(eds).Version(); r.VersionInfo != want {
			t.Fatalf("version %q, want the set's %q", r.VersionInfo, want)
		}
		// The same for a named full-state subscription, as gRPC's.
		s3 := e.ads(t, "grpc")
		vc := fetch(t, s3, cds, "a").VersionInfo
		hangUp(t, e.rec, s3, "grpc")
		s4 := e.ads(t, "grpc")
		firstRequest(s4, cds, vc, "a", "b")
		wantNames(t, s4.RecvType(cds), "a", "b")
		// A name added that does not exist: the version of what the client
		// holds is unchanged, but the response tells it at once that the
		// name does not exist (a full-state type's absence, X22).
		s5 := e.ads(t, "grpc-2")
		vc = fetch(t, s5, cds, "a").VersionInfo
		hangUp(t, e.rec, s5, "grpc-2")
		s6 := e.ads(t, "grpc-2")
		firstRequest(s6, cds, vc, "a", "nope")
		r = s6.RecvType(cds)
		wantNames(t, r, "a")
		if r.VersionInfo != vc {
			t.Fatalf("version %q, want the unchanged %q", r.VersionInfo, vc)
		}
		if n := sparedOf(e.rec, "n1", eds) + sparedOf(e.rec, "grpc", cds) + sparedOf(e.rec, "grpc-2", cds); n != 0 {
			t.Fatalf("%d spared resends, want none", n)
		}
	})

	t.Run("X24_named_subscription_spared_then_name_added", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "grpc")
		vc := fetch(t, s, cds, "a").VersionInfo
		va := fetch(t, s, eds, "a").VersionInfo
		hangUp(t, e.rec, s, "grpc")
		s2 := e.ads(t, "grpc")
		firstRequest(s2, cds, vc, "a")
		firstRequest(s2, eds, va, "a")
		s2.ACK(greeting(t, s2, eds, va, 1, nil), "a")
		s2.ExpectSilence()
		for _, url := range []string{cds, eds} {
			if n := sparedOf(e.rec, "grpc", url); n != 1 {
				t.Fatalf("%s spared %d times, want 1", url, n)
			}
		}
		// gRPC adds a name: its request carries no nonce, since nothing
		// of the type came on this stream. It is answered, not stale.
		s2.Request(eds, "a", "b")
		r := s2.RecvType(eds)
		wantNames(t, r, "b")
		if want := e.srv.Publisher.Current().For(nil).Set(eds).Version(); r.VersionInfo != want {
			t.Fatalf("version %q after adding b, want the set's %q", r.VersionInfo, want)
		}
		s2.ACK(r, "a", "b")
		s2.Request(cds, "a", "b")
		wantNames(t, s2.RecvType(cds), "a", "b")
	})

	t.Run("X24_X38_assignments_answered_after_clusters_resent", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "envoy")
		vc := fetch(t, s, cds).VersionInfo
		ve := fetch(t, s, eds, "a", "b").VersionInfo
		hangUp(t, e.rec, s, "envoy")
		// The clusters change while the proxy is away; their assignments
		// do not.
		e.srv.Publish(t, changedCluster()...)

		// Envoy's order: clusters first. They are resent, so the
		// assignments' first request is answered though the version
		// matches: the changed cluster warms until it gets one.
		s2 := e.ads(t, "envoy")
		firstRequest(s2, cds, vc)
		firstRequest(s2, eds, ve, "a", "b")
		wantNames(t, s2.RecvType(cds), "a", "b")
		r := s2.RecvType(eds)
		wantNames(t, r, "a", "b")
		if r.VersionInfo != ve {
			t.Fatalf("EDS version %q, want the unchanged %q", r.VersionInfo, ve)
		}

		// The other order: assignments spared, then clusters resent; the
		// assignment request Envoy sends after applying the clusters (no
		// nonce on this stream yet) is answered in full.
		s3 := e.ads(t, "envoy-2")
		firstRequest(s3, eds, ve, "a", "b")
		firstRequest(s3, cds, vc)
		s3.ACK(greeting(t, s3, eds, ve, 1, nil), "a", "b")
		c := s3.RecvType(cds)
		s3.ACK(c)
		s3.Request(eds, "a", "b")
		wantNames(t, s3.RecvType(eds), "a", "b")
		if n := sparedOf(e.rec, "envoy-2", eds); n != 1 {
			t.Fatalf("EDS spared %d times before the clusters, want 1", n)
		}

		// Per-type streams cannot see the node's CDS stream resend: EDS
		// is always answered there.
		typ := e.srv.Registry.Lookup(eds)
		p := xdstest.OpenType(t, e.conn, typ, xdstest.Node("split"))
		ve2 := fetch(t, p, eds, "a").VersionInfo
		hangUp(t, e.rec, p, "split")
		p2 := xdstest.OpenType(t, e.conn, typ, xdstest.Node("split"))
		firstRequest(p2, eds, ve2, "a")
		wantNames(t, p2.RecvType(eds), "a")
	})

	t.Run("X24_X37_spared_clusters_still_hold_back_a_route", func(t *testing.T) {
		// The clusters stay; payments-v2's assignment changes and the
		// route moves to it while the proxy is away. On the new stream the
		// clusters and listener are spared, the assignments resent, and
		// the route waits until the proxy ACKs them: a spared type counts
		// as ACKed, so make-before-break applies as on the old stream.
		world := func(v int) []any {
			return []any{
				xdstest.Cluster("web"), xdstest.Cluster("payments-v1"), xdstest.Cluster("payments-v2"),
				xdstest.Endpoints("web", 8080), xdstest.Endpoints("payments-v1", 9001), xdstest.Endpoints("payments-v2", uint32(9000+100*v)),
				ingress("ingress", "routes", 10000), routeTable("routes", "/pay", fmt.Sprintf("payments-v%d", v), "/", "web"),
			}
		}
		e := startMBB(t, time.Minute)
		e.srv.Publish(t, world(1)...)
		s := e.ads(t, "envoy")
		assignments := []string{"payments-v1", "payments-v2", "web"}
		held := map[string]string{
			cds: fetch(t, s, cds).VersionInfo,
			eds: fetch(t, s, eds, assignments...).VersionInfo,
			lds: fetch(t, s, lds).VersionInfo,
			rds: fetch(t, s, rds, "routes").VersionInfo,
		}
		hangUp(t, e.rec, s, "envoy")
		e.srv.Publish(t, world(2)...)

		s2 := e.ads(t, "envoy")
		firstRequest(s2, cds, held[cds])
		firstRequest(s2, eds, held[eds], assignments...)
		firstRequest(s2, lds, held[lds])
		firstRequest(s2, rds, held[rds], "routes")
		r := s2.RecvType(eds)
		wantNames(t, r, assignments...)
		s2.ExpectSilence() // the route is held back
		s2.ACK(r, assignments...)
		route := s2.RecvType(rds)
		wantNames(t, route, "routes")
		m, err := route.Resources[0].UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if got := xdstest.Refs(m); !slices.Equal(got, []string{"payments-v2", "web"}) {
			t.Fatalf("route names %v, want payments-v2 and web", got)
		}
		for url, want := range map[string]int{cds: 1, lds: 1, eds: 0, rds: 0} {
			if n := sparedOf(e.rec, "envoy", url); n != want {
				t.Fatalf("%s spared %d times, want %d", url, n, want)
			}
		}
	})

	t.Run("X24_X37_envoy_model_reconnects", func(t *testing.T) {
		e := startMBB(t, time.Minute)
		e.srv.Publish(t, payments(1)...)
		p := xdstest.NewProxy(t, e.conn, "envoy", false)
		p.Settle()
		e.waitACKs(t, "envoy", cds, eds, lds, rds)

		// Nothing changed: every type is spared; one assignment comes
		// back unchanged, the stream's one message.
		before := p.Messages
		p.Reconnect(e.conn)
		p.Settle()
		noViolations(t, p)
		if p.Messages != before+1 || greetings(e.rec, "envoy") != 1 {
			t.Fatalf("%d responses applied after a reconnect with nothing changed (%d greetings), want the greeting alone", p.Messages-before, greetings(e.rec, "envoy"))
		}
		for _, url := range []string{cds, eds, lds, rds} {
			if n := sparedOf(e.rec, "envoy", url); n != 1 {
				t.Fatalf("%s spared %d times, want 1", url, n)
			}
		}
		// Then changes flow on the new stream as on the old one.
		e.srv.Publish(t, payments(2)...)
		p.Settle()
		noViolations(t, p)
		wantRoute(t, p, "payments-v2", "web")
		wantClusters(t, p, "payments-v2", "web")

		// A change published while the stream is dead reaches the proxy
		// in full on the new one. (What the proxy holds of the old config
		// is unknown to the new stream until it ACKs there, so, as for a
		// fresh proxy, make-before-break starts from its ACKs: only the
		// end state is checked here.)
		e.srv.Publish(t, payments(3)...)
		p.Reconnect(e.conn)
		p.Settle()
		wantRoute(t, p, "payments-v3", "web")
		wantClusters(t, p, "payments-v3", "web")
	})

	t.Run("X24_X41_ttl_resources_resent_others_spared", func(t *testing.T) {
		// A client using TTLs counts them down; the resend is what
		// refreshes them after the gap of a reconnect, so a type holding
		// one is resent. The others are spared, and heartbeats go on.
		e := setup(t, ttlWorld(200*time.Millisecond)...)
		node := nodeWith("envoy", featTTL, featWrap)
		s := xdstest.OpenADS(t, e.conn, node)
		vc := fetch(t, s, cds).VersionInfo
		vr := fetch(t, s, rtds, "flag").VersionInfo
		hangUp(t, e.rec, s, "envoy")
		s2 := xdstest.OpenADS(t, e.conn, node)
		firstRequest(s2, cds, vc)
		firstRequest(s2, rtds, vr, "flag")
		r := s2.RecvType(rtds)
		var res discoveryv3.Resource
		if err := r.Resources[0].UnmarshalTo(&res); err != nil || r.VersionInfo != vr || res.Resource == nil || res.Ttl == nil {
			t.Fatalf("resend of a TTL resource at %q: %v (%v)", r.VersionInfo, &res, err)
		}
		s2.ACK(r, "flag")
		hb := s2.RecvType(rtds)
		if err := hb.Resources[0].UnmarshalTo(&res); err != nil || hb.VersionInfo != vr || res.Resource != nil || res.Ttl == nil {
			t.Fatalf("heartbeat after the reconnect at %q: %v (%v)", hb.VersionInfo, &res, err)
		}
		if n := sparedOf(e.rec, "envoy", cds); n != 1 {
			t.Fatalf("CDS spared %d times, want 1", n)
		}
	})

	t.Run("X24_replica_spares_what_another_sent", func(t *testing.T) {
		// Two servers built from the same config, as two replicas publish
		// the same store revision: a client of the first that fails over
		// to the second is resent nothing.
		a, b := setup(t), setup(t)
		a.srv.Publisher.Publish(fleet.NewFleet(xdstest.Snapshot(t, a.srv.Registry, base()...), time.Now()))
		b.srv.Publisher.Publish(fleet.NewFleet(xdstest.Snapshot(t, b.srv.Registry, base()...), time.Now()))

		s := a.ads(t, "envoy")
		held := map[string]*discoveryv3.DiscoveryResponse{
			cds: fetch(t, s, cds),
			eds: fetch(t, s, eds, "a", "b"),
			lds: fetch(t, s, lds),
			rds: fetch(t, s, rds, "r1"),
		}
		hangUp(t, a.rec, s, "envoy")
		s2 := b.ads(t, "envoy")
		firstRequest(s2, cds, held[cds].VersionInfo)
		firstRequest(s2, eds, held[eds].VersionInfo, "a", "b")
		firstRequest(s2, lds, held[lds].VersionInfo)
		firstRequest(s2, rds, held[rds].VersionInfo, "r1")
		s2.ACK(greeting(t, s2, eds, held[eds].VersionInfo, 1, held[eds]), "a", "b")
		s2.ExpectSilence()
		saved := 0
		for url, r := range held {
			ev := b.rec.wait(t, func(e status.Event) bool { return e.Kind == status.ResponseSpared && e.TypeURL == url })
			if ev.Version != r.VersionInfo || ev.Resources != len(r.Resources) {
				t.Fatalf("replica spared %s at %q with %d resources, want %q with %d", url, ev.Version, ev.Resources, r.VersionInfo, len(r.Resources))
			}
			saved += ev.Bytes
		}
		if n := b.rec.count(func(e status.Event) bool {
			return e.Kind == status.ResponseSent && e.TypeURL != xdstype.RuntimeURL && !e.Greeting
		}); n != 0 {
			t.Fatalf("the replica sent %d responses besides the greeting, want none", n)
		}
		if saved == 0 {
			t.Fatal("spared resends report no bytes saved")
		}
	})
}

// TestX24Greeting: a reconnecting client whose resends are all spared still
// gets one message on its new stream, the cheapest that changes nothing,
// since Envoy and grpc-go reset their reconnect backoff only on a message.
func TestX24Greeting(t *testing.T) {
	t.Run("X24_fully_spared_ads_reconnect_gets_one_smallest_assignment", func(t *testing.T) {
		world := func() []any {
			return []any{
				xdstest.Cluster("a"), xdstest.Cluster("b"),
				xdstest.Endpoints("a", 1001, 1002, 1003), xdstest.Endpoints("b", 1004),
				xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"),
			}
		}
		e := setup(t, world()...)
		s := e.ads(t, "envoy")
		held := map[string]*discoveryv3.DiscoveryResponse{
			cds: fetch(t, s, cds),
			eds: fetch(t, s, eds, "a", "b"),
			lds: fetch(t, s, lds),
			rds: fetch(t, s, rds, "r1"),
		}
		hangUp(t, e.rec, s, "envoy")
		// grpc-go sends its types in map order: the listeners and
		// clusters may come first, as here.
		s2 := e.ads(t, "envoy")
		firstRequest(s2, lds, held[lds].VersionInfo)
		firstRequest(s2, cds, held[cds].VersionInfo)
		firstRequest(s2, rds, held[rds].VersionInfo, "r1")
		firstRequest(s2, eds, held[eds].VersionInfo, "a", "b")
		// RDS is the first per-resource type asked for: its one route.
		g := greeting(t, s2, rds, held[rds].VersionInfo, 1, held[rds])
		s2.ACK(g, "r1")
		s2.ExpectSilence()
		for url := range held {
			if n := sparedOf(e.rec, "envoy", url); n != 1 {
				t.Fatalf("%s spared %d times, want 1", url, n)
			}
		}
		if n := greetings(e.rec, "envoy"); n != 1 {
			t.Fatalf("%d greetings, want 1", n)
		}
		e.rec.wait(t, func(ev status.Event) bool {
			return ev.Kind == status.RequestACK && ev.TypeURL == rds && ev.Nonce == g.Nonce && ev.Version == held[rds].VersionInfo
		})

		// Envoy's order: clusters, then assignments: the smaller
		// assignment, b (one endpoint), unchanged.
		hangUp(t, e.rec, s2, "envoy")
		s3 := e.ads(t, "envoy")
		firstRequest(s3, cds, held[cds].VersionInfo)
		firstRequest(s3, eds, held[eds].VersionInfo, "a", "b")
		firstRequest(s3, lds, held[lds].VersionInfo)
		firstRequest(s3, rds, held[rds].VersionInfo, "r1")
		g = greeting(t, s3, eds, held[eds].VersionInfo, 1, held[eds])
		wantNames(t, g, "b")
		s3.ACK(g, "a", "b")
		s3.ExpectSilence()
		if n := greetings(e.rec, "envoy"); n != 2 {
			t.Fatalf("%d greetings after two reconnects, want 2", n)
		}
	})

	t.Run("X24_no_greeting_when_something_is_sent", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "envoy")
		vc := fetch(t, s, cds).VersionInfo
		ve := fetch(t, s, eds, "a", "b").VersionInfo
		hangUp(t, e.rec, s, "envoy")
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
		// The clusters changed: their resend is the stream's first
		// message, and the assignments (warmed, X38) follow in full.
		s2 := e.ads(t, "envoy")
		firstRequest(s2, cds, vc)
		firstRequest(s2, eds, ve, "a", "b")
		wantNames(t, s2.RecvType(cds), "a", "b", "c")
		wantNames(t, s2.RecvType(eds), "a", "b")
		s2.ExpectSilence()
		if n := greetings(e.rec, "envoy"); n != 0 {
			t.Fatalf("%d greetings on a stream that was sent changes, want 0", n)
		}
	})
}
