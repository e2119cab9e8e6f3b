package protocol

import (
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Make-before-break (X37, X39) as pure functions of the planner: what the
// client holds, the time and the hold's bound in, a decision out. No
// stream, no gRPC; package xds's mbb_test.go drives the same rules over
// the wire.

// TestX37_ARouteWaitsForTheClusterItNamesUntilItArrives: a route naming a
// cluster the client subscribes to and has not ACKed, with its assignment
// and nothing of either in flight, is held back; not while the client
// fetches its first config, not for a cluster it does not subscribe to,
// not past the hold's bound unless the client rejected the cluster.
func TestX37_ARouteWaitsForTheClusterItNamesUntilItArrives(t *testing.T) {
	reg := xdstype.New()
	snap := world(t, reg, 2, 9000, "c0")
	route := snap.Set(xdstype.RouteURL).Get("main")
	cluster := snap.Set(xdstype.ClusterURL).Get("c0")
	assignment := snap.Set(xdstype.EndpointURL).Get("c0")
	type clientCDS struct {
		named, wildcard, unsynced   bool
		ackedCluster, nackedCluster bool
		clusterInFlight             bool
	}
	for _, c := range []struct {
		name             string
		cds              *clientCDS // nil: the client has no CDS here
		ackedAssignment  bool
		expired          bool
		wait, held, nack bool
	}{
		{name: "X37_cluster_not_subscribed_never_waited_for", cds: nil},
		{name: "X37_first_fetch_never_waits", cds: &clientCDS{wildcard: true, unsynced: true}},
		{name: "X37_cluster_and_assignment_acked_route_goes", cds: &clientCDS{wildcard: true, ackedCluster: true}, ackedAssignment: true},
		{name: "X37_cluster_lacking_route_waits", cds: &clientCDS{wildcard: true}, wait: true, held: true},
		{name: "X37_cluster_named_and_lacking_route_waits", cds: &clientCDS{named: true}, wait: true, held: true},
		{name: "X37_assignment_lacking_route_waits", cds: &clientCDS{wildcard: true, ackedCluster: true}, wait: true, held: true},
		{name: "X37_cluster_in_flight_route_waits", cds: &clientCDS{wildcard: true, ackedCluster: true, clusterInFlight: true}, ackedAssignment: true, wait: true, held: true},
		{name: "X37_hold_past_its_bound_route_goes", cds: &clientCDS{wildcard: true}, expired: true},
		{name: "X37_rejected_cluster_route_waits_past_the_bound", cds: &clientCDS{wildcard: true, nackedCluster: true}, expired: true, wait: true, nack: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cds, eds *TypeState
			if c.cds != nil {
				cds = &TypeState{Type: reg.Lookup(xdstype.ClusterURL), Wildcard: c.cds.wildcard}
				cds.Synced = !c.cds.unsynced
				if c.cds.named {
					cds.Names = map[string]struct{}{"c0": {}}
				}
				if c.cds.ackedCluster {
					cds.Acked = map[string]*snapshot.Resource{"c0": cluster}
				}
				if c.cds.nackedCluster {
					cds.reject("c0", cluster)
				}
				if c.cds.clusterInFlight {
					cds.bump("c0")
				}
				eds = &TypeState{Type: reg.Lookup(xdstype.EndpointURL), Names: map[string]struct{}{"c0": {}}}
				if c.ackedAssignment {
					eds.Acked = map[string]*snapshot.Resource{"c0": assignment}
				}
			}
			view := func(url string) Holdings {
				switch {
				case url == xdstype.ClusterURL && cds != nil:
					return cds
				case url == xdstype.EndpointURL && eds != nil:
					return eds
				}
				return nil
			}
			p := &Planner{view: view, cfg: &PlanConfig{ranked: reg.Ranked(), share: NewSharing(), holdTimeout: time.Second}, Now: time.Now(), expired: c.expired}
			if got := p.mustWait(route); got != c.wait {
				t.Errorf("route waits = %v, want %v", got, c.wait)
			}
			if p.held != c.held || p.rejected != c.nack {
				t.Errorf("held back for a slow client %v, for a rejection %v; want %v, %v", p.held, p.rejected, c.held, c.nack)
			}
			if got := len(p.rejects) > 0; got != c.nack {
				t.Errorf("rejected holds to log: %d, want some: %v", len(p.rejects), c.nack)
			}
		})
	}
}

// TestX37_AHoldIsBoundedFromWhenItBegan: a hold for a slow client starts
// its bound the first time something is held back, keeps it while holds
// go on, and a full pass that holds nothing back ends it and the wake-up.
func TestX37_AHoldIsBoundedFromWhenItBegan(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	earlier := now.Add(-300 * time.Millisecond)
	const bound = time.Second
	for _, c := range []struct {
		name                 string
		held, rejected, wait bool // what the pass held back
		full                 bool
		holding              bool      // before the pass
		since                time.Time // before the pass
		want                 HoldDecision
	}{
		{name: "X37_first_hold_starts_the_bound", held: true, full: true, want: HoldDecision{Holding: true, Since: now, Wake: now.Add(bound), Rewake: true}},
		{name: "X37_hold_going_on_keeps_its_start", held: true, full: true, holding: true, since: earlier, want: HoldDecision{Holding: true, Since: earlier, Wake: earlier.Add(bound), Rewake: true}},
		{name: "X37_full_pass_holding_nothing_ends_the_hold", full: true, holding: true, since: earlier, want: HoldDecision{Rewake: true}},
		{name: "X37_answer_holding_nothing_changes_nothing", holding: true, since: earlier, want: HoldDecision{Holding: true, Since: earlier}},
		{name: "X37_waiting_removal_holds_unbounded", wait: true, full: true, want: HoldDecision{Holding: true, Rewake: true}},
		{name: "X37_rejection_holds_unbounded", rejected: true, full: true, since: earlier, want: HoldDecision{Holding: true, Rewake: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Planner{cfg: &PlanConfig{holdTimeout: bound}, Now: now, held: c.held, rejected: c.rejected, waiting: c.wait}
			if got := p.Decide(c.full, c.holding, c.since); got != c.want {
				t.Errorf("decide = %+v, want %+v", got, c.want)
			}
		})
	}
}
