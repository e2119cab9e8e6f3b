// Package protocol is the xDS protocol's pure core: what a stream's client
// subscribes to and holds of each type, in state of the world (Watch) and
// delta (DeltaWatch) over one per-type state (TypeState); what the next
// response carries (Plan), make-before-break included (Planner); and the
// values streams in the same state share (Sharing: subscriptions, the
// canons of what they hold, the transitions between snapshots).
//
// Everything here is a plain value of its inputs (a request, a snapshot
// set, what the client holds, the time), with no gRPC, no logging, no
// status and no timers: package xds, the stream shell, owns the streams,
// sends what the core plans, reports it and carries out what the planner
// decided (HoldDecision, RejectedHolds). So a protocol rule is tested here
// as a pure function, table by table (x24_test.go, mbb_test.go), beside the
// wire tests of package xds that drive the same rule over gRPC.
package protocol
