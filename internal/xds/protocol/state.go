package protocol

import (
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TypeState is one stream's state for one resource type, whatever the
// variant: the subscription, what the client holds (the ledger), the
// versions status is told. The
// state-of-the-world watch (sotw.go) and the delta watch (delta.go) embed
// it and add only what their variant has of its own, so that a stream's
// pass over its types (pass), what it reports (expect) and what
// make-before-break reads (holdings) are written once for both. It is a
// plain value owned by the stream's loop; nothing here touches gRPC.
type TypeState struct {
	Type   *xdstype.Type
	shared *Sharing // where subscriptions and canons are shared

	// Sub is the subscription, shared with every stream subscribed alike;
	// names are its explicit names, never "*". Both are read-only.
	Sub   *Subscription
	Names map[string]struct{}
	// Reported is the subscription last reported (SubscriptionChanged).
	Reported *Subscription
	// force holds names just added to the subscription: the next response
	// carries them even if the client seems to hold them (X17, X29).
	force map[string]struct{}

	// ledger: what the client was sent (held) and ACKed (acked), per
	// resource. Either map may be a canon's shared one (heldAs, ackedAs):
	// replaced or copied, never written.
	Ledger

	// Version is what the type's latest response (not a heartbeat) brought
	// the client to: the response's version_info in state of the world,
	// the set's version in delta. ackedVersion is that of the latest
	// response the client ACKed: what it runs, for the NACK log line.
	// expected is what status was last told the client should hold
	// (expect).
	Version, AckedVersion, Expected string
	// Settled is the set version the client fully has, nothing held back:
	// a publish that leaves the type's set at that version needs no plan.
	// (For VirtualHosts, with the route configurations' version: ContentAt.)
	Settled string

	// The flags, together: each apart would take a word of every watch.
	Started  bool // a request for the type has been processed
	Wildcard bool
	// legacy is set for a wildcard by an empty first request, not by "*"
	// (X19, X32).
	legacy bool
	// Sent is set once a response of the type went out (in state of the
	// world, also once a resend was spared: adopt).
	Sent bool
}

// State is s itself: what a watch of either variant shares.
func (s *TypeState) State() *TypeState { return s }

// Book is what the client holds of the type (Holdings).
func (s *TypeState) Book() *Ledger { return &s.Ledger }

// Covers reports whether the client's subscription includes name. The
// delta watch of VirtualHosts answers otherwise (DeltaWatch.Covers).
func (s *TypeState) Covers(name string) bool {
	_, ok := s.Names[name]
	return ok || s.Wildcard || s.Sub.inCollection(name)
}
