package status

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// What happens on the xDS streams, as the server reports it: events of a
// few kinds, lent to an Observer. The server fills them; the tracker, the
// metrics and the rollout controller read them, and none of them needs
// the server.

// EventKind says what happened on a stream.
type EventKind int

// Stream events.
const (
	StreamOpened EventKind = iota
	StreamClosed
	ResponseSent
	RequestACK
	RequestNACK
	// NoMatchingGroup: the stream's node matches no group and receives
	// nothing.
	NoMatchingGroup
	// Subscribed: the stream's first request for TypeURL.
	Subscribed
	// SubscriptionChanged: what the stream subscribes to of TypeURL, a
	// full-state type (Listener, Cluster, scopes), changed (its first
	// subscription included): Wildcard, and the explicit Names. Not
	// reported for a request that leaves it as it is (an ACK repeating
	// its names).
	SubscriptionChanged
	// StreamRefused: the server ends the stream on purpose, for Reason (one
	// of the xds package's Refused constants: a bounded set, fit for a
	// metric label),
	// with Detail saying why. A stream refused at its first request was
	// never opened: no StreamOpened or StreamClosed comes with it; one
	// refused later is followed by its StreamClosed.
	StreamRefused
	// RequestIgnored: a request the server ignores, for Reason (one of the
	// xds package's Ignored constants). Only counted: its content is the
	// client's.
	RequestIgnored
	// ExpectedVersion: what the stream's client should hold of TypeURL is
	// Version, which may differ from its group's version of the type: with
	// nothing pending for the type it is the version last sent (a change to
	// names it does not subscribe to leaves it up to date), and Secrets
	// withheld from the stream are not counted. Reported for each type the
	// client asks for, and again whenever it changes (to a Selective
	// observer, only while it wants them: the stream's status has it,
	// Event.Status).
	ExpectedVersion
	// ResponseSpared: a SotW client reconnecting with version_info Version
	// of TypeURL already holds exactly what the server would send (X24), so
	// nothing is sent: treat it as sent and ACKed at Version. Resources and
	// Bytes are what the spared response would have carried (its encoded
	// size without nonce and control plane); Sent is what the client
	// holds, as a ResponseSent's (for CSDS and drift).
	ResponseSpared
	// ConnectionClosed: a connection served on the xds server's Listener
	// ended, for Reason (one of the xds package's Conn constants: a
	// bounded set, fit for a metric label); Peer is the client's address.
	// Not a stream's event: StreamID is 0 and Node nil. Every reason but
	// ConnClientClosed is the server ending every stream on the
	// connection.
	ConnectionClosed
	// TransportRefused: gRPC refused a new stream on a connection served
	// on the xds server's Listener before Pylon saw it, for Reason
	// (TransportRefusedStreams). StreamID is 0 and Node nil.
	TransportRefused
	// TypeSynced: TypeURL of the stream is synced for the first time (its
	// client ACKed what was sent last, which is what it should hold);
	// FirstSync is the time from the stream's open to then.
	TypeSynced
	// VersionTaken: the stream's first ACK of Version of TypeURL (planned
	// from SetVersion), reported with that RequestACK: the client took a
	// version it did not run before, as a change's push does.
	VersionTaken
)

// Event is one thing that happened on an xDS stream, reported to the
// Observer from the stream's own loop. The xds server fills it; events
// are plain values, so that whoever observes them (the tracker, the
// metrics, the rollout controller) needs nothing of the server.
type Event struct {
	Kind     EventKind
	StreamID uint64
	// Node is the node the stream's client sent (its Envoy node, read
	// through its getters; NodeID reads its id): nil on events that are
	// not a stream's. Read-only.
	Node Node
	// Member is the node as group rules and rollout stages match it: its
	// metadata, locality and verified identities, which Node leaves out.
	// Nil before the stream's first request; owned by the stream:
	// read-only, and only while the event is handled.
	Member *nodegroup.Node
	// Group is the node's group when the event happened ("" for none).
	Group   string
	TypeURL string
	Version string
	// SetVersion, for ExpectedVersion and for a SotW stream's
	// ResponseSent, ResponseSpared and RequestACK, is the version of the type's whole set in the snapshot
	// the response was planned from: the version a publish introduced,
	// for push latency. Version identifies what this client holds, which
	// for a subscription to part of the set is a version of its own
	// (X24). Empty on delta streams, whose Version is the set's.
	SetVersion string
	Nonce      string
	// Resources is the count sent, for ResponseSent (not sent, for
	// ResponseSpared).
	Resources int
	// Sent is what a ResponseSent carried, or what the client of a
	// ResponseSpared holds, decoded (shared with the snapshot:
	// read-only); Removed the names it removed (delta).
	Sent    []proto.Message
	Removed []string
	// Bytes is the encoded size of the response, for ResponseSent and
	// ResponseSpared.
	Bytes int
	// Peer is the client's address.
	Peer string
	// Detail is the client's error_detail message, for RequestNACK (cut to
	// 4 KiB), the stream's end, for StreamClosed, or why it was refused,
	// for StreamRefused.
	Detail string
	// Reason is a refusal's or an ignored request's reason, for
	// StreamRefused and RequestIgnored; why a stream ended, for
	// StreamClosed (one of the xds package's Closed constants); why a
	// connection ended, for ConnectionClosed; why gRPC refused a stream,
	// for TransportRefused.
	Reason string
	// Identity is what the connection's verified client certificate
	// proves, "" without one.
	Identity string
	// Names is the subscription's explicit names, for SubscriptionChanged
	// (with Wildcard): sorted, shared by every stream subscribed alike
	// (read-only).
	Names []string
	At    time.Time
	// Status reads the stream's status on demand (nil on events that are
	// not a stream's, and on a server without an observer): what it sent
	// and what its client ACKed and should hold of each type. The xds
	// server's streams keep it themselves (see Live).
	Status Live
	// FirstSync is a TypeSynced's time from the stream's open.
	FirstSync time.Duration
	// Opened, on a VersionTaken, is when the stream opened: a change
	// accepted before then is the stream's initial config, not a push.
	Opened time.Time
	// The flags, together: an event is lent down several frames of the
	// xDS stream's goroutine.
	//
	// ADS and Delta say how the stream is served.
	ADS, Delta bool
	// Heartbeat marks a ResponseSent that only refreshed TTLs.
	Heartbeat bool
	// Greeting marks a ResponseSent that changes nothing the client holds:
	// the one message a reconnecting SotW client whose resends were all
	// spared (X24) gets on its new stream, so that it resets its
	// reconnect backoff. Its Resources (one, for a per-resource type) are
	// resent at the version the client holds.
	Greeting bool
	// Wildcard is whether the subscription, for SubscriptionChanged,
	// includes the wildcard (see Names).
	Wildcard bool
	// Poll marks the events of a stream that is one REST poll
	// (ServeStream): it ends with its answer, and the next poll is a
	// stream of its own.
	Poll bool
}

// Observer receives stream events. It is called from a stream's reader
// and from the server's drainers (drainers.go), which push to every stream
// of the fleet: it must not block, nor wait on a lock held across I/O
// (the rollout controller writes its state after releasing the lock its
// events take). The event is lent for the call: an observer neither
// changes it nor keeps the pointer (it copies what it keeps). By pointer,
// so that an event of some 300 bytes is not copied again at each level of
// observers on the stream's goroutine, whose stack must stay within 8 KB
// (see the xds server's serveStream).
type Observer interface {
	Observe(e *Event)
}

// Selective is an Observer that wants some kinds of events only at times.
// The server asks before it builds each event of the kinds every stream
// reports on every change: ExpectedVersion, ResponseSent, RequestACK and
// VersionTaken. Reported to an observer that only counted them, those
// events cost a fleet as much CPU again as the status tracking they fed.
// An observer that reads the streams' status when it needs it
// (Event.Status) wants few of them. Other kinds are always reported.
type Selective interface {
	Observer
	Wants(k EventKind) bool
}

// Node is what an event shows of its stream's node: the getters of the
// Envoy node the client sent, which the xds server passes as it is.
// Status holds no Envoy type; a nil Node is none.
type Node interface {
	GetId() string
	GetCluster() string
	GetUserAgentName() string
	GetUserAgentVersion() string
}

// NodeID is the id of e's node, "" for none.
func (e *Event) NodeID() string {
	if e.Node == nil {
		return ""
	}
	return e.Node.GetId()
}

// ComposeObservers returns an Observer that lends each event to every
// observer of obs in turn, nils left out. It is Selective: it wants a
// kind when any of obs does (one that is not Selective wants every
// kind). None: nil; one: that one.
func ComposeObservers(obs ...Observer) Observer {
	var c composed
	for _, o := range obs {
		if o != nil {
			c = append(c, o)
		}
	}
	switch len(c) {
	case 0:
		return nil
	case 1:
		return c[0]
	}
	return c
}

// composed is observers lent each event in turn.
type composed []Observer

func (c composed) Observe(e *Event) {
	for _, o := range c {
		o.Observe(e)
	}
}

func (c composed) Wants(k EventKind) bool {
	for _, o := range c {
		if sel, ok := o.(Selective); !ok || sel.Wants(k) {
			return true
		}
	}
	return false
}
