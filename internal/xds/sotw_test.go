package xds_test

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const (
	cds = xdstype.ClusterURL
	eds = xdstype.EndpointURL
	lds = xdstype.ListenerURL
	rds = xdstype.RouteURL
	sds = xdstype.SecretURL
)

// recorder is an Observer that keeps events for tests to wait on.
type recorder struct {
	mu     sync.Mutex
	events []status.Event
	wake   chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) Observe(e *status.Event) {
	r.mu.Lock()
	r.events = append(r.events, *e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// wait returns the first event matching ok, failing after a bound.
func (r *recorder) wait(t *testing.T, ok func(status.Event) bool) status.Event {
	t.Helper()
	deadline := time.After(xdstest.Timeout)
	for {
		r.mu.Lock()
		for _, e := range r.events {
			if ok(e) {
				r.mu.Unlock()
				return e
			}
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-deadline:
			r.mu.Lock()
			var seen []string
			for _, e := range r.events {
				seen = append(seen, fmt.Sprintf("%d:%s:%s:%s", e.Kind, e.NodeID(), e.TypeURL, e.Nonce))
			}
			r.mu.Unlock()
			t.Fatalf("no matching event within %v; events: %v", xdstest.Timeout, seen)
		}
	}
}

// all returns a copy of the events so far.
func (r *recorder) all() []status.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]status.Event(nil), r.events...)
}

func (r *recorder) count(ok func(status.Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if ok(e) {
			n++
		}
	}
	return n
}

type env struct {
	srv  *xdstest.Server
	conn *grpc.ClientConn
	rec  *recorder
	// served is what the server the client speaks to serves: srv's
	// fleets, or, through a relay, the relay's.
	served *fleet.Publisher
}

// setup starts a server publishing msgs (serve: through a relay with
// -through-relay) and dials it.
func setup(t *testing.T, msgs ...any) *env {
	t.Helper()
	return serve(t, xds.Options{}, msgs...)
}

func (e *env) ads(t *testing.T, id string) *xdstest.Stream {
	return xdstest.OpenADS(t, e.conn, xdstest.Node(id))
}

// names returns the names of the resources in resp, sorted.
func names(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range resp.Resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, xdstype.NameOf(m))
	}
	sort.Strings(out)
	return out
}

func wantNames(t *testing.T, resp *discoveryv3.DiscoveryResponse, want ...string) {
	t.Helper()
	got := names(t, resp)
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s response %s holds %v, want %v", resp.TypeUrl, resp.Nonce, got, want)
	}
}

// base is a small consistent world: two clusters with endpoints, a listener
// and its routes.
func base() []any {
	return []any{
		xdstest.Cluster("a"), xdstest.Cluster("b"),
		xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 1002),
		xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"),
	}
}

func with(extra ...any) []any { return append(base(), extra...) }

func TestSotW(t *testing.T) {
	t.Run("X1_ads_serves_every_type", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		wantNames(t, s.RecvType(cds), "a", "b")
		s.Request(eds, "a")
		wantNames(t, s.RecvType(eds), "a")
		s.Request(lds)
		wantNames(t, s.RecvType(lds), "l1")
		s.Request(rds, "r1")
		wantNames(t, s.RecvType(rds), "r1")
	})

	t.Run("X1_per_type_streams", func(t *testing.T) {
		e := setup(t, base()...)
		reg := e.srv.Registry
		for _, c := range []struct {
			url   string
			names []string
			want  []string
		}{
			{cds, nil, []string{"a", "b"}},
			{eds, []string{"b"}, []string{"b"}},
			{lds, nil, []string{"l1"}},
			{rds, []string{"r1"}, []string{"r1"}},
			{xdstype.RuntimeURL, []string{xdstest.ProbeName}, []string{xdstest.ProbeName}},
		} {
			s := xdstest.OpenType(t, e.conn, reg.Lookup(c.url), xdstest.Node("n1"))
			// Per-type streams may leave type_url empty.
			s.Send(&discoveryv3.DiscoveryRequest{ResourceNames: c.names})
			resp := s.Recv()
			if resp.TypeUrl != c.url {
				t.Fatalf("type_url %q, want %q", resp.TypeUrl, c.url)
			}
			wantNames(t, resp, c.want...)
			s.Close()
		}
	})

	t.Run("X2_ads_request_without_type_url_is_an_error", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Send(&discoveryv3.DiscoveryRequest{})
		if got := grpcstatus.Code(s.Err()); got != codes.InvalidArgument {
			t.Fatalf("stream ended with %v, want InvalidArgument", got)
		}
	})

	t.Run("X2_unknown_type_is_ignored", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request("type.googleapis.com/example.NotAnXdsType", "x")
		s.ExpectSilence()
		s.Request(cds)
		wantNames(t, s.RecvType(cds), "a", "b")
	})

	t.Run("X2_per_type_stream_rejects_other_type", func(t *testing.T) {
		e := setup(t, base()...)
		s := xdstest.OpenType(t, e.conn, e.srv.Registry.Lookup(cds), xdstest.Node("n1"))
		s.Request(lds)
		if got := grpcstatus.Code(s.Err()); got != codes.InvalidArgument {
			t.Fatalf("stream ended with %v, want InvalidArgument", got)
		}
	})

	t.Run("X3_node_only_on_first_request", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "first")
		s.Request(cds)
		s.RecvType(cds)
		// Later requests omit the node, or even name another: the stream's
		// identity stays the first node's.
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a"}, Node: xdstest.Node("impostor")})
		s.RecvType(eds)
		ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.ResponseSent && ev.TypeURL == eds })
		if ev.NodeID() != "first" {
			t.Fatalf("stream node %q, want %q", ev.NodeID(), "first")
		}
	})

	t.Run("X3_first_request_without_node_is_an_error", func(t *testing.T) {
		e := setup(t, base()...)
		s := xdstest.OpenADS(t, e.conn, nil)
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: cds})
		if got := grpcstatus.Code(s.Err()); got != codes.InvalidArgument {
			t.Fatalf("stream ended with %v, want InvalidArgument", got)
		}
	})

	t.Run("X4_nonces_unique_and_per_stream", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		seen := map[string]bool{}
		note := func(r *discoveryv3.DiscoveryResponse) {
			if r.Nonce == "" || seen[r.Nonce] {
				t.Fatalf("nonce %q empty or reused", r.Nonce)
			}
			seen[r.Nonce] = true
		}
		s.Request(cds)
		note(s.RecvType(cds))
		s.Request(eds, "a")
		note(s.RecvType(eds))
		s.Request(eds, "a", "b")
		note(s.RecvType(eds))
		s.Request(lds)
		note(s.RecvType(lds))
		old := s.Nonce[cds]
		s.Close()
		// A new stream starts fresh: a nonce from the old stream does not
		// make its first request stale.
		s2 := e.ads(t, "n1")
		s2.Send(&discoveryv3.DiscoveryRequest{TypeUrl: cds, ResponseNonce: old, VersionInfo: "old"})
		wantNames(t, s2.RecvType(cds), "a", "b")
	})

	t.Run("X5_version_per_type", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		c1 := s.RecvType(cds)
		s.Request(eds, "a")
		e1 := s.RecvType(eds)
		snap := e.srv.Publisher.Current().For(nil)
		// The version identifies what the client holds (X24): the type's
		// version for all of it, else the same hash over just what it
		// holds, as if the set held only that.
		onlyA := xdstest.Snapshot(t, e.srv.Registry, xdstest.Endpoints("a", 1001)).Set(eds).Version()
		if c1.VersionInfo != snap.Set(cds).Version() || e1.VersionInfo != onlyA || onlyA == snap.Set(eds).Version() {
			t.Fatalf("versions cds=%s eds=%s, want %s (all clusters) and %s (assignment a alone)", c1.VersionInfo, e1.VersionInfo, snap.Set(cds).Version(), onlyA)
		}
		s.Request(cds)
		s.Request(eds, "a")
		// Only the endpoints change: only EDS gets a new version.
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Endpoints("a", 2001), xdstest.Endpoints("b", 1002), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		e2 := s.RecvType(eds)
		if e2.VersionInfo == e1.VersionInfo {
			t.Fatal("EDS version did not change")
		}
		s.ExpectSilence()
	})

	t.Run("X7_identical_content_not_resent", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		s.RecvType(cds)
		s.Request(eds, "a")
		s.RecvType(eds)
		s.Request(cds)
		s.Request(eds, "a")
		// A new listener changes neither clusters nor assignment "a"; an
		// assignment the stream did not subscribe to changes nothing either.
		e.srv.Publish(t, with(xdstest.APIListener("l2", "r1"))...)
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 3333), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		s.ExpectSilence()
		if n := e.rec.count(func(ev status.Event) bool { return ev.Kind == status.ResponseSent && ev.TypeURL != xdstype.RuntimeURL }); n != 2 {
			t.Fatalf("%d CDS/EDS responses sent, want 2", n)
		}
	})

	t.Run("X8_no_duplicate_names", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(eds, "a", "a", "b", "a")
		resp := s.RecvType(eds)
		if len(resp.Resources) != 2 {
			t.Fatalf("%d resources, want 2", len(resp.Resources))
		}
		wantNames(t, resp, "a", "b")
	})

	t.Run("X9_control_plane_identifier", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		if id := s.RecvType(cds).GetControlPlane().GetIdentifier(); id != "pylon-test" {
			t.Fatalf("control_plane.identifier %q, want pylon-test", id)
		}
	})

	t.Run("X10_nack_is_error_detail_not_version", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		resp := s.RecvType(cds)
		// A NACK whose version equals the one sent is still a NACK.
		s.NACK(resp, resp.VersionInfo, "bad cluster")
		ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestNACK })
		if ev.Detail != "bad cluster" || ev.Nonce != resp.Nonce {
			t.Fatalf("NACK event %+v", ev)
		}
		// An ACK whose version differs from the one sent is still an ACK.
		s.Request(eds, "a")
		r2 := s.RecvType(eds)
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a"}, ResponseNonce: r2.Nonce, VersionInfo: "whatever"})
		e.rec.wait(t, func(ev status.Event) bool {
			return ev.Kind == status.RequestACK && ev.TypeURL == eds && ev.Version == "whatever"
		})
		s.ExpectSilence()
		if n := e.rec.count(func(ev status.Event) bool { return ev.Kind == status.RequestACK && ev.TypeURL == cds }); n != 0 {
			t.Fatalf("NACK counted as %d ACKs", n)
		}
	})

	t.Run("X11_nack_at_current_version_for_new_name", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(eds, "a")
		r1 := s.RecvType(eds)
		s.ACK(r1, "a")
		s.ACK(r1, "a", "b")
		r2 := s.RecvType(eds)
		// Same snapshot, but the version says what the client holds (X24):
		// now both assignments, the whole set.
		if want := e.srv.Publisher.Current().For(nil).Set(eds).Version(); r2.VersionInfo != want || r1.VersionInfo == want {
			t.Fatalf("versions %s for a, %s for a and b; want the set's %s only for a and b", r1.VersionInfo, r2.VersionInfo, want)
		}
		// The client rejects the newly subscribed "b" and keeps the version
		// it runs.
		s.NACK(r2, r1.VersionInfo, "b is bad", "a", "b")
		ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestNACK })
		if ev.Version != r2.VersionInfo {
			t.Fatalf("NACK event version %q, want the rejected %q", ev.Version, r2.VersionInfo)
		}
		s.ExpectSilence()
	})

	t.Run("X12_nacked_version_not_resent", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		r1 := s.RecvType(cds)
		s.NACK(r1, "", "rejected")
		s.ExpectSilence()
		// Asking again with the same NACK changes nothing either.
		s.NACK(r1, "", "rejected")
		s.ExpectSilence()
		// The next change is sent.
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
		r2 := s.RecvType(cds)
		wantNames(t, r2, "a", "b", "c")
		if r2.VersionInfo == r1.VersionInfo {
			t.Fatal("new content, same version")
		}
	})

	t.Run("X13_ack_closes_outstanding_response", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		r := s.RecvType(cds)
		s.ACK(r)
		ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestACK && ev.TypeURL == cds })
		if ev.Version != r.VersionInfo || ev.Nonce != r.Nonce {
			t.Fatalf("ACK event version %q nonce %q, want %q %q", ev.Version, ev.Nonce, r.VersionInfo, r.Nonce)
		}
		s.ExpectSilence()
	})

	t.Run("X14_stale_nonce_not_answered", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(eds, "a")
		r1 := s.RecvType(eds)
		s.ACK(r1, "a")
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Endpoints("a", 4444), xdstest.Endpoints("b", 1002), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		r2 := s.RecvType(eds)
		// A request carrying the older nonce, even one that changes the
		// subscription, is ignored.
		s.ACK(r1, "a", "b")
		s.ExpectSilence()
		s.ACK(r2, "a", "b")
		// Per-resource type: the response holds the new name; the client
		// keeps "a" (X22).
		wantNames(t, s.RecvType(eds), "b")
	})

	t.Run("X15_several_requests_one_response", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		// Two requests in a row: the second is stale once the first is
		// answered, and one later response covers both.
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a"}})
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a", "b"}})
		r1 := s.RecvType(eds)
		wantNames(t, r1, "a")
		s.ExpectSilence()
		s.ACK(r1, "a", "b")
		wantNames(t, s.RecvType(eds), "b") // "a" is kept by the client
	})

	t.Run("X6_latest_request_wins", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds, "a")
		r := s.RecvType(cds)
		s.ACK(r, "a", "b")
		s.ACK(r, "b") // stale once the first is answered
		wantNames(t, s.RecvType(cds), "a", "b")
		s.ExpectSilence()
		s.Request(cds, "b")
		wantNames(t, s.RecvType(cds), "b")
	})

	t.Run("X16_names_are_the_complete_set", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds, "a", "b")
		wantNames(t, s.RecvType(cds), "a", "b")
		s.Request(cds, "b")
		wantNames(t, s.RecvType(cds), "b")
		s.Request(eds, "a", "b")
		wantNames(t, s.RecvType(eds), "a", "b")
		s.Request(eds, "b")
		s.ExpectSilence()
		// "a" is no longer subscribed: its change is not sent.
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Endpoints("a", 5555), xdstest.Endpoints("b", 1002), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		s.ExpectSilence()
	})

	t.Run("X17_resubscribe_resends_unchanged", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(eds, "a")
		r1 := s.RecvType(eds)
		s.Request(eds)
		s.ExpectSilence()
		s.Request(eds, "a")
		r2 := s.RecvType(eds)
		wantNames(t, r2, "a")
		if r2.VersionInfo != r1.VersionInfo || !proto.Equal(r1.Resources[0], r2.Resources[0]) {
			t.Fatal("resubscription should resend the same resource at the same version")
		}
	})

	t.Run("X18_empty_after_explicit_means_nothing", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds, "a")
		wantNames(t, s.RecvType(cds), "a")
		s.Request(cds)
		wantNames(t, s.RecvType(cds))
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
		s.ExpectSilence()
	})

	t.Run("X19_legacy_wildcard", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		wantNames(t, s.RecvType(cds), "a", "b")
		s.Request(cds) // the ACK keeps resource_names empty: still wildcard
		e.srv.Publish(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
		wantNames(t, s.RecvType(cds), "a", "b", "c")
		// Naming a resource ends the legacy wildcard.
		s.Request(cds, "a")
		wantNames(t, s.RecvType(cds), "a")
	})

	t.Run("X19_explicit_wildcard_and_names", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds, "*", "zz")
		wantNames(t, s.RecvType(cds), "a", "b")
		e.srv.Publish(t, with(xdstest.Cluster("zz"), xdstest.Endpoints("zz", 1003))...)
		wantNames(t, s.RecvType(cds), "a", "b", "zz")
		// Dropping "*" ends the wildcard; the explicit name stays.
		s.Request(cds, "zz")
		wantNames(t, s.RecvType(cds), "zz")
		e.srv.Publish(t, with(xdstest.Cluster("zz"), xdstest.Endpoints("zz", 1003), xdstest.Cluster("c"), xdstest.Endpoints("c", 1004))...)
		s.ExpectSilence()
	})

	t.Run("X19_empty_first_request_not_wildcard_for_named_types", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(eds)
		s.ExpectSilence()
		s.Request(eds, "*")
		wantNames(t, s.RecvType(eds), "a", "b")
	})

	t.Run("X20_named_listeners_are_not_wildcard", func(t *testing.T) {
		e := setup(t, with(xdstest.APIListener("l2", "r1"))...)
		s := e.ads(t, "grpc-client")
		s.Request(lds, "l2")
		wantNames(t, s.RecvType(lds), "l2")
		s.Request(cds, "b")
		wantNames(t, s.RecvType(cds), "b")
	})

	t.Run("X21_names_requested_before_they_exist", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(eds, "later")
		s.ExpectSilence()
		s.Request(lds, "later")
		wantNames(t, s.RecvType(lds)) // full state: absent means it does not exist
		s.Request(lds, "later")
		e.srv.Publish(t, with(xdstest.Cluster("later"), xdstest.Endpoints("later", 1009), xdstest.APIListener("later", "r1"))...)
		// Make-before-break order on ADS: endpoints, then the listener.
		wantNames(t, s.RecvType(eds), "later")
		wantNames(t, s.RecvType(lds), "later")
	})

	t.Run("X22_full_state_absence_deletes", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		s.RecvType(cds)
		s.Request(cds)
		e.srv.Publish(t, xdstest.Cluster("b"), xdstest.Endpoints("b", 1002))
		wantNames(t, s.RecvType(cds), "b")
		s.Request(cds)
		e.srv.Publish(t)
		wantNames(t, s.RecvType(cds))
	})

	t.Run("X22_per_resource_empty_changes_nothing", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(eds, "a")
		s.RecvType(eds)
		s.Request(eds, "a")
		// Removing "a" leaves nothing subscribed that exists: no empty
		// response, which Envoy would read as an assignment gone missing.
		e.srv.Publish(t, xdstest.Cluster("b"), xdstest.Endpoints("b", 1002))
		s.ExpectSilence()
	})

	t.Run("X22_per_resource_response_holds_only_what_changed", func(t *testing.T) {
		e := setup(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 3))...)
		s := e.ads(t, "n1")
		s.Request(eds, "a", "b", "c")
		wantNames(t, s.RecvType(eds), "a", "b", "c")
		s.Request(eds, "a", "b", "c")
		// One assignment changes: one assignment on the wire.
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Cluster("c"),
			xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 7777), xdstest.Endpoints("c", 3),
			xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		wantNames(t, s.RecvType(eds), "b")
	})

	t.Run("X23_many_names_in_one_request", func(t *testing.T) {
		e := setup(t, with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
		s := e.ads(t, "n1")
		s.Request(eds, "a", "b", "c", "missing")
		wantNames(t, s.RecvType(eds), "a", "b", "c")
	})

	t.Run("X37_ads_push_in_dependency_order", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		for _, req := range []struct {
			url   string
			names []string
		}{{lds, nil}, {rds, []string{"r1"}}, {cds, nil}, {eds, []string{"a", "b", "c"}}} {
			s.Request(req.url, req.names...)
			s.RecvType(req.url)
			s.Request(req.url, req.names...)
		}
		// One change touching every type arrives clusters first, then
		// endpoints, listeners, routes.
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Cluster("c"),
			xdstest.Endpoints("a", 1), xdstest.Endpoints("b", 2), xdstest.Endpoints("c", 3),
			xdstest.APIListener("l1", "r1"), xdstest.APIListener("l9", "r1"), xdstest.Route("r1", "c"))
		// The client ACKs each response as it comes, as Envoy does; the
		// route waits for the ACKs of the cluster it now names.
		subs := map[string][]string{lds: nil, rds: {"r1"}, cds: nil, eds: {"a", "b", "c"}}
		var order []string
		for range 4 {
			r := s.Recv()
			order = append(order, r.TypeUrl)
			s.Request(r.TypeUrl, subs[r.TypeUrl]...)
		}
		if want := []string{cds, eds, lds, rds}; !slices.Equal(order, want) {
			t.Fatalf("push order %v, want %v", order, want)
		}
	})

	t.Run("X38_eds_answered_after_cds_update", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "envoy")
		s.Request(cds)
		s.RecvType(cds)
		s.Request(cds)
		s.Request(eds, "a", "b")
		r1 := s.RecvType(eds)
		s.Request(eds, "a", "b")
		s.ExpectSilence()
		// Cluster "a" changes, its endpoints do not.
		ca := xdstest.Cluster("a")
		ca.ConnectTimeout.Seconds = 7
		e.srv.Publish(t, ca, xdstest.Cluster("b"), xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 1002), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
		s.RecvType(cds)
		s.Request(cds)
		// Envoy re-requests the same assignments to warm the cluster: the
		// request is answered though nothing changed.
		s.Request(eds, "a", "b")
		r2 := s.RecvType(eds)
		if r2.VersionInfo != r1.VersionInfo {
			t.Fatalf("unchanged endpoints, version %s -> %s", r1.VersionInfo, r2.VersionInfo)
		}
		s.Request(eds, "a", "b")
		s.ExpectSilence()
	})

	t.Run("X38_rds_answered_after_lds_update", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "envoy")
		s.Request(lds)
		s.RecvType(lds)
		s.Request(lds)
		s.Request(rds, "r1")
		s.RecvType(rds)
		s.Request(rds, "r1")
		e.srv.Publish(t, with(xdstest.APIListener("l2", "r1"))...)
		s.RecvType(lds)
		s.Request(lds)
		s.Request(rds, "r1")
		wantNames(t, s.RecvType(rds), "r1")
	})

	t.Run("X39_cluster_reaches_client_before_route_naming_it", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "envoy")
		s.Request(rds, "r1")
		s.RecvType(rds)
		s.Request(rds, "r1")
		s.Request(cds)
		s.RecvType(cds)
		s.Request(cds)
		s.ExpectSilence() // the ACKs above are processed
		// One change adds cluster "canary" and points route r1 at it.
		e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Cluster("canary"),
			xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 1002), xdstest.Endpoints("canary", 1003),
			xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "canary"))
		wantNames(t, s.RecvType(cds), "a", "b", "canary")
		// Not before the client has the cluster.
		s.ExpectSilence()
		s.Request(cds)
		wantNames(t, s.RecvType(rds), "r1")
	})

	t.Run("X40_requests_answered_during_a_stream_of_pushes", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		s.RecvType(cds)
		s.Request(cds)
		// Keep publishing while the client subscribes to a new type: the
		// request is served between pushes, not after them all.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 500; i++ {
				select {
				case <-stop:
					return
				default:
				}
				e.srv.Publish(t, with(xdstest.Cluster(fmt.Sprint("extra-", i)), xdstest.Endpoints(fmt.Sprint("extra-", i), 1))...)
			}
		}()
		defer func() { close(stop); <-done }()
		s.Request(lds, "l1")
		for {
			resp := s.Recv()
			if resp.TypeUrl == lds {
				wantNames(t, resp, "l1")
				return
			}
			s.ACK(resp)
		}
	})
}
