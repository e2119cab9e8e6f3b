package xds_test

import (
	"slices"
	"sort"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func (e *env) delta(t *testing.T, id string) *xdstest.DeltaStream {
	return xdstest.OpenDeltaADS(t, e.conn, xdstest.Node(id))
}

// wantDelta checks a delta response's resource names and removals exactly.
func wantDelta(t *testing.T, resp *discoveryv3.DeltaDiscoveryResponse, names []string, removed []string) {
	t.Helper()
	var got []string
	for _, r := range resp.Resources {
		m, err := r.GetResource().UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if xdstype.NameOf(m) != r.GetName() || r.GetVersion() == "" {
			t.Fatalf("resource %q carries %q, version %q", r.GetName(), xdstype.NameOf(m), r.GetVersion())
		}
		got = append(got, r.GetName())
	}
	sort.Strings(got)
	gotRemoved := slices.Clone(resp.RemovedResources)
	sort.Strings(gotRemoved)
	if !slices.Equal(got, names) || !slices.Equal(gotRemoved, removed) {
		t.Fatalf("%s delta response %s: resources %v removed %v, want %v and %v", resp.TypeUrl, resp.Nonce, got, gotRemoved, names, removed)
	}
}

func versions(resp *discoveryv3.DeltaDiscoveryResponse) map[string]string {
	out := map[string]string{}
	for _, r := range resp.Resources {
		out[r.Name] = r.Version
	}
	return out
}

func TestDelta(t *testing.T) {
	t.Run("X1_delta_ads_and_per_type_streams", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		wantDelta(t, s.RecvType(cds), []string{"a", "b"}, nil)
		s.Subscribe(eds, "a")
		wantDelta(t, s.RecvType(eds), []string{"a"}, nil)
		for _, c := range []struct {
			url   string
			names []string
			want  []string
		}{
			{cds, nil, []string{"a", "b"}},
			{eds, []string{"b"}, []string{"b"}},
			{lds, nil, []string{"l1"}},
			{rds, []string{"r1"}, []string{"r1"}},
		} {
			ps := xdstest.OpenDeltaType(t, e.conn, e.srv.Registry.Lookup(c.url), xdstest.Node("n2"))
			ps.Send(&discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: c.names}) // type_url may be empty
			resp := ps.Recv()
			if resp.TypeUrl != c.url {
				t.Fatalf("type_url %q, want %q", resp.TypeUrl, c.url)
			}
			wantDelta(t, resp, c.want, nil)
			ps.Close()
		}
	})

	t.Run("X2_delta_ads_without_type_url_is_an_error", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Send(&discoveryv3.DeltaDiscoveryRequest{})
		if got := grpcstatus.Code(s.Err()); got != codes.InvalidArgument {
			t.Fatalf("stream ended with %v, want InvalidArgument", got)
		}
	})

	t.Run("X25_only_changed_resources", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		first := s.RecvType(cds)
		s.ACK(first)
		ca := xdstest.Cluster("a")
		ca.ConnectTimeout.Seconds = 9
		e.srv.Publish(t, ca, xdstest.Cluster("b"), xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 1002), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		resp := s.RecvType(cds)
		wantDelta(t, resp, []string{"a"}, nil)
		if versions(resp)["a"] == versions(first)["a"] {
			t.Fatal("changed resource kept its version")
		}
		s.ACK(resp)
		s.ExpectSilence()
	})

	t.Run("X26_nonce_and_system_version_info", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		r1 := s.RecvType(cds)
		s.Subscribe(eds, "a")
		r2 := s.RecvType(eds)
		if r1.Nonce == "" || r2.Nonce == "" || r1.Nonce == r2.Nonce {
			t.Fatalf("nonces %q %q", r1.Nonce, r2.Nonce)
		}
		want := e.srv.Publisher.Current().For(nil).Version()
		if r1.SystemVersionInfo != want || r2.SystemVersionInfo != want {
			t.Fatalf("system_version_info %q %q, want the snapshot's %q", r1.SystemVersionInfo, r2.SystemVersionInfo, want)
		}
		if r1.GetControlPlane().GetIdentifier() != "pylon-test" {
			t.Fatal("control_plane.identifier missing")
		}
	})

	t.Run("X27_subscription_honoured_with_stale_nonce", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(eds, "a")
		r1 := s.RecvType(eds)
		s.ACK(r1)
		s.Subscribe(eds, "b")
		r2 := s.RecvType(eds)
		// A request carrying the older nonce still changes the subscription.
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r1.Nonce, ResourceNamesSubscribe: []string{"c"}})
		wantDelta(t, s.RecvType(eds), nil, []string{"c"})
		s.ACK(r2)
	})

	t.Run("X28_ack_and_subscription_in_one_request", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(eds, "a")
		r1 := s.RecvType(eds)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r1.Nonce, ResourceNamesSubscribe: []string{"b"}})
		wantDelta(t, s.RecvType(eds), []string{"b"}, nil)
		e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestACK && ev.Delta && ev.Nonce == r1.Nonce })
	})

	t.Run("X29_subscribe_answered_even_if_held", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(eds, "a")
		r1 := s.RecvType(eds)
		s.ACK(r1)
		s.Subscribe(eds, "a")
		r2 := s.RecvType(eds)
		wantDelta(t, r2, []string{"a"}, nil)
		if versions(r1)["a"] != versions(r2)["a"] {
			t.Fatal("same content, different version")
		}
	})

	t.Run("X30_unsubscribe_never_subscribed_ignored", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(eds, "a")
		s.ACK(s.RecvType(eds))
		s.Unsubscribe(eds, "never", "*")
		s.ExpectSilence()
		s.Subscribe(eds, "b")
		wantDelta(t, s.RecvType(eds), []string{"b"}, nil)
	})

	t.Run("X31_wildcard_keeps_unsubscribed_name", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds, "*", "a")
		s.ACK(s.RecvType(cds))
		s.Unsubscribe(cds, "a")
		s.ExpectSilence()
		// "a" is still covered by the wildcard: its changes arrive.
		ca := xdstest.Cluster("a")
		ca.ConnectTimeout.Seconds = 5
		e.srv.Publish(t, ca, xdstest.Cluster("b"), xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 1002), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		wantDelta(t, s.RecvType(cds), []string{"a"}, nil)
	})

	t.Run("X32_legacy_wildcard_ends_with_a_name", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		s.ACK(s.RecvType(cds))
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 3))...)
		wantDelta(t, s.RecvType(cds), []string{"c"}, nil)
		s.Subscribe(cds, "a")
		wantDelta(t, s.RecvType(cds), []string{"a"}, nil)
		// No longer wildcard: a new cluster is not sent.
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 3), xdstest.Cluster("d"), xdstest.Endpoints("d", 4))...)
		s.ExpectSilence()
	})

	t.Run("X32_unsubscribing_star_ends_wildcard", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds, "*")
		s.ACK(s.RecvType(cds))
		s.Unsubscribe(cds, "*")
		s.ExpectSilence()
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 3))...)
		s.ExpectSilence()
	})

	t.Run("X32_empty_first_request_not_wildcard_for_named_types", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(eds)
		wantDelta(t, s.RecvType(eds), nil, nil)
	})

	t.Run("X33_not_found_in_removed_resources", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(eds, "a", "ghost")
		r := s.RecvType(eds)
		wantDelta(t, r, []string{"a"}, []string{"ghost"})
		s.ACK(r)
		// Still subscribed: it is sent once it exists.
		e.srv.Publish(t, with(xdstest.Cluster("ghost"), xdstest.Endpoints("ghost", 7))...)
		wantDelta(t, s.RecvType(eds), []string{"ghost"}, nil)
	})

	t.Run("X33_not_found_can_be_suppressed", func(t *testing.T) {
		rec := newRecorder()
		srv := xdstest.Start(t, xds.Options{Observer: rec, SuppressDeltaNotFound: true})
		srv.Publish(t, base()...)
		s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("old-envoy"))
		s.Subscribe(eds, "a", "ghost")
		wantDelta(t, s.RecvType(eds), []string{"a"}, nil)
	})

	t.Run("X34_deletion_is_removed_resources", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		s.ACK(s.RecvType(cds))
		s.Subscribe(eds, "a", "b")
		s.ACK(s.RecvType(eds))
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Endpoints("a", 1001), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		r := s.RecvType(cds)
		wantDelta(t, r, nil, []string{"b"})
		// The assignment goes after its cluster is gone from the client.
		s.ExpectSilence()
		s.ACK(r)
		wantDelta(t, s.RecvType(eds), nil, []string{"b"})
		// Once told, never told again.
		s.ExpectSilence()
	})

	t.Run("X35_initial_resource_versions", func(t *testing.T) {
		e := setup(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 3))...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		held := versions(s.RecvType(cds))
		s.Close()
		// While away: "a" changed, "c" was deleted, "d" was added; "b" is
		// unchanged.
		ca := xdstest.Cluster("a")
		ca.ConnectTimeout.Seconds = 4
		e.srv.Publish(t, ca, xdstest.Cluster("b"), xdstest.Cluster("d"), xdstest.Endpoints("a", 1), xdstest.Endpoints("b", 2), xdstest.Endpoints("d", 4), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		s2 := e.delta(t, "n1")
		s2.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cds, InitialResourceVersions: held})
		wantDelta(t, s2.RecvType(cds), []string{"a", "d"}, []string{"c"})
	})

	t.Run("X10_X12_nack_not_resent", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		r := s.RecvType(cds)
		s.NACK(r, "cluster a is bad")
		ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestNACK && ev.Delta })
		if ev.Detail != "cluster a is bad" || ev.Nonce != r.Nonce || ev.Version == "" {
			t.Fatalf("NACK event %+v", ev)
		}
		s.ExpectSilence()
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 3))...)
		wantDelta(t, s.RecvType(cds), []string{"c"}, nil)
	})
}

// A client that holds everything reconnects to a restarted Pylon serving the
// same config: the first response carries nothing. After one cluster
// changed while it was away, it carries exactly that one.
func TestDeltaReconnectAfterRestart(t *testing.T) {
	world := func(timeout int64) []any {
		var out []any
		for _, n := range []string{"a", "b", "c", "d"} {
			c := xdstest.Cluster(n)
			if n == "c" {
				c.ConnectTimeout.Seconds = timeout
			}
			out = append(out, c, xdstest.Endpoints(n, 1000))
		}
		return append(out, xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
	}
	first := xdstest.Start(t, xds.Options{})
	first.Publish(t, world(1)...)
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, first.Addr), xdstest.Node("envoy"))
	held := map[string]map[string]string{}
	s.Subscribe(cds)
	held[cds] = versions(s.RecvType(cds))
	s.Subscribe(eds, "a", "b", "c", "d")
	held[eds] = versions(s.RecvType(eds))
	s.Subscribe(lds)
	held[lds] = versions(s.RecvType(lds))
	s.Subscribe(rds, "r1")
	held[rds] = versions(s.RecvType(rds))
	s.Close()

	reconnect := func(srv *xdstest.Server) map[string]*discoveryv3.DeltaDiscoveryResponse {
		s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("envoy"))
		got := map[string]*discoveryv3.DeltaDiscoveryResponse{}
		for _, sub := range []struct {
			url   string
			names []string
		}{{cds, nil}, {eds, []string{"a", "b", "c", "d"}}, {lds, nil}, {rds, []string{"r1"}}} {
			s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: sub.url, ResourceNamesSubscribe: sub.names, InitialResourceVersions: held[sub.url]})
			got[sub.url] = s.RecvType(sub.url)
		}
		return got
	}

	// A new process with the same config: versions are content hashes.
	restarted := xdstest.Start(t, xds.Options{})
	restarted.Publish(t, world(1)...)
	for url, resp := range reconnect(restarted) {
		if len(resp.Resources) != 0 || len(resp.RemovedResources) != 0 {
			t.Errorf("%s: reconnect resent %d resources, removed %v; want nothing", url, len(resp.Resources), resp.RemovedResources)
		}
	}

	changed := xdstest.Start(t, xds.Options{})
	changed.Publish(t, world(3)...)
	got := reconnect(changed)
	wantDelta(t, got[cds], []string{"c"}, nil)
	for _, url := range []string{eds, lds, rds} {
		if len(got[url].Resources) != 0 {
			t.Errorf("%s: %d resources resent", url, len(got[url].Resources))
		}
	}
}

// A delta client through add, change, remove and not-found for each of the
// four main types. It ACKs every response, as Envoy does, so what waits for
// an ACK follows.
func TestDeltaAllMainTypes(t *testing.T) {
	e := setup(t, base()...)
	s := e.delta(t, "n1")
	recv := func(url string, names []string, removed []string) {
		t.Helper()
		r := s.RecvType(url)
		wantDelta(t, r, names, removed)
		s.ACK(r)
	}
	s.Subscribe(cds)
	recv(cds, []string{"a", "b"}, nil)
	s.Subscribe(eds, "a", "b", "n")
	recv(eds, []string{"a", "b"}, []string{"n"})
	s.Subscribe(lds)
	recv(lds, []string{"l1"}, nil)
	s.Subscribe(rds, "r1", "rn")
	recv(rds, []string{"r1"}, []string{"rn"})

	// Add "n" everywhere (the not-found names now exist): clusters first.
	e.srv.Publish(t, with(xdstest.Cluster("n"), xdstest.Endpoints("n", 5), xdstest.APIListener("ln", "rn"), xdstest.Route("rn", "n"))...)
	recv(cds, []string{"n"}, nil)
	recv(eds, []string{"n"}, nil)
	recv(lds, []string{"ln"}, nil)
	recv(rds, []string{"rn"}, nil)

	// Change "n" everywhere.
	cn := xdstest.Cluster("n")
	cn.ConnectTimeout.Seconds = 6
	ln := xdstest.APIListener("ln", "rn")
	ln.StatPrefix = "changed"
	e.srv.Publish(t, with(cn, xdstest.Endpoints("n", 6), ln, xdstest.Route("rn", "a"))...)
	recv(cds, []string{"n"}, nil)
	recv(eds, []string{"n"}, nil)
	recv(lds, []string{"ln"}, nil)
	recv(rds, []string{"rn"}, nil)

	// Remove "n" everywhere. A removal waits until nothing the client
	// holds names it: the listener and the cluster (now unnamed, as route
	// "rn" points at "a") go at once; the route after the listener's
	// removal is ACKed, the assignment after its cluster's.
	e.srv.Publish(t, base()...)
	at := map[string]int{}
	for i := range 4 {
		r := s.Recv()
		if len(r.Resources) != 0 || len(r.RemovedResources) != 1 {
			t.Fatalf("%s: resources %d removed %v", r.TypeUrl, len(r.Resources), r.RemovedResources)
		}
		at[r.TypeUrl] = i
		s.ACK(r)
	}
	if len(at) != 4 || at[rds] < at[lds] || at[eds] < at[cds] {
		t.Fatalf("removal order %v: routes must follow their listener, assignments their cluster", at)
	}
	s.ExpectSilence()
}
