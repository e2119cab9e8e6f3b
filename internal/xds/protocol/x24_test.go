package protocol

import (
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// The reconnect rules (X24) and warming (X38) as pure functions of the
// protocol core: no stream, no gRPC. Package xds's x24_test.go drives the
// same rules over the wire.

// TestX24_SparesOnlyAResendTheClientHoldsExactly: a first request of a
// type whose version_info is the version of exactly what it would be sent
// is spared its resend, and every exception to that is resent.
func TestX24_SparesOnlyAResendTheClientHoldsExactly(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	snap := world(t, reg, 3, 9000, "c0")
	ttlSnap := ttlWorld(t, reg)
	for _, c := range []struct {
		name     string
		snap     *snapshot.Snapshot
		url      string
		names    []string // nil: wildcard
		version  string   // "exact": the canon's version
		nonce    string
		nack     bool
		partial  bool // the plan is not the shared canon
		heldBack bool
		on       StreamTraits
		want     bool
	}{
		{name: "X24_exact_version_spared", url: xdstype.ClusterURL, version: "exact", want: true},
		{name: "X24_exact_version_of_named_assignments_spared", url: xdstype.EndpointURL, names: []string{"c0", "c1"}, version: "exact", want: true},
		{name: "X24_no_version_resent", url: xdstype.ClusterURL, version: ""},
		{name: "X24_other_version_resent", url: xdstype.ClusterURL, version: "0123456789abcdef"},
		{name: "X24_nonce_is_not_a_reconnect", url: xdstype.ClusterURL, version: "exact", nonce: "1"},
		{name: "X24_nack_resent", url: xdstype.ClusterURL, version: "exact", nack: true},
		{name: "X24_plan_not_the_shared_set_resent", url: xdstype.ClusterURL, version: "exact", partial: true},
		{name: "X24_plan_holding_back_resent", url: xdstype.ClusterURL, version: "exact", heldBack: true},
		{name: "X24_missing_cluster_name_resent", url: xdstype.ClusterURL, names: []string{"c0", "gone"}, version: "exact"},
		{name: "X24_missing_assignment_name_spared", url: xdstype.EndpointURL, names: []string{"c0", "gone"}, version: "exact", want: true},
		{name: "X24_X38_warmed_assignments_resent", url: xdstype.EndpointURL, version: "exact", on: StreamTraits{Warmed: true}},
		{name: "X24_X38_per_type_assignments_always_resent", url: xdstype.EndpointURL, version: "exact", on: StreamTraits{PerType: true}},
		{name: "X24_X38_per_type_routes_always_resent", url: xdstype.RouteURL, names: []string{"main"}, version: "exact", on: StreamTraits{PerType: true}},
		{name: "X24_per_type_cluster_stream_owes_its_first_message", url: xdstype.ClusterURL, version: "exact", on: StreamTraits{PerType: true}},
		{name: "X24_rest_poll_of_clusters_spared", url: xdstype.ClusterURL, version: "exact", on: StreamTraits{PerType: true, Quiet: true}, want: true},
		{name: "X24_X41_ttl_resource_resent_to_a_ttl_client", snap: ttlSnap, url: xdstype.EndpointURL, names: []string{"c0"}, version: "exact", on: StreamTraits{TTL: true}},
		{name: "X24_X41_ttl_resource_spared_without_ttls", snap: ttlSnap, url: xdstype.EndpointURL, names: []string{"c0"}, version: "exact", want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := snap
			if c.snap != nil {
				s = c.snap
			}
			set := s.Set(c.url)
			cn := share.canon(set, share.subs.get(c.names == nil, c.names))
			o := Outcome{Next: cn.held, As: cn}
			if c.partial {
				o = Outcome{Next: cn.held}
			}
			req := &discoveryv3.DiscoveryRequest{TypeUrl: c.url, VersionInfo: c.version, ResponseNonce: c.nonce, ResourceNames: c.names}
			if c.version == "exact" {
				req.VersionInfo = cn.version
			}
			if c.nack {
				req.ErrorDetail = &rpcstatus.Status{Message: "rejected"}
			}
			if got := SparesResend(req, reg.Lookup(c.url), o, c.heldBack, set, c.on); got != c.want {
				t.Errorf("spared = %v, want %v (version %q, canon %q)", got, c.want, req.VersionInfo, cn.version)
			}
		})
	}
}

// TestX38_AResponseWarmsTheTypeEnvoyWaitsFor: after clusters Envoy waits
// for fresh assignments, after listeners for fresh route configurations;
// nothing else warms anything.
func TestX38_AResponseWarmsTheTypeEnvoyWaitsFor(t *testing.T) {
	for _, c := range []struct{ url, warms string }{
		{xdstype.ClusterURL, xdstype.EndpointURL},
		{xdstype.ListenerURL, xdstype.RouteURL},
		{xdstype.EndpointURL, ""},
		{xdstype.RouteURL, ""},
		{xdstype.SecretURL, ""},
	} {
		if got := Warms(c.url); got != c.warms {
			t.Errorf("warms(%s) = %q, want %q", c.url, got, c.warms)
		}
		if got, want := warmed(c.url), c.url == xdstype.EndpointURL || c.url == xdstype.RouteURL; got != want {
			t.Errorf("warmed(%s) = %v, want %v", c.url, got, want)
		}
	}
}

// ttlWorld is one assignment, c0, with a TTL.
func ttlWorld(t *testing.T, reg *xdstype.Registry) *snapshot.Snapshot {
	t.Helper()
	snap, err := snapshot.Build(reg, []xdstype.Resource{{
		Type: reg.Lookup(xdstype.EndpointURL), Name: "c0", TTL: time.Minute,
		Message: &endpointv3.ClusterLoadAssignment{ClusterName: "c0"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
