package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Why a stream ended, as its disconnect line says and its StreamClosed
// event's Reason (a bounded set, fit for a metric label).
const (
	// ClosedByClient: the client ended the stream or its connection.
	ClosedByClient = "client_closed"
	// ClosedByShutdown: the server shut down (Server.Shutdown).
	ClosedByShutdown = "server_shutdown"
	// ClosedEvicted: the stream, or another on its connection, left a
	// response unread past the send bound; the connection was closed.
	ClosedEvicted = "evicted"
	// ClosedRefused: the server refused the stream (StreamRefused says
	// why).
	ClosedRefused = "refused"
	// ClosedDraining: Drain handed the stream over to another replica.
	ClosedDraining = "draining"
	// ClosedError: anything else, such as a failed send.
	ClosedError = "error"
)

// kind names the stream for people: "ADS", "ADS delta", "CDS", "CDS delta".
func (st *stream) kind() string {
	k := "ADS"
	if st.typeURL != "" {
		k = st.typeURL
		if t := st.srv.opts.Registry.Lookup(st.typeURL); t != nil {
			k = t.Abbrev
		}
	}
	if st.delta {
		k += " delta"
	}
	return k
}

// logOpened says a proxy connected: one line per accepted stream, the
// operator's answer to "is my proxy talking to Pylon, and as whom?". Every
// client string in it is bounded (the node id and cluster by checkNode).
func (st *stream) logOpened() {
	group := "none"
	if st.group != nil {
		group = st.group.Name
	}
	client := st.node.GetUserAgentName()
	if v := st.node.GetUserAgentVersion(); v != "" {
		client += " " + v
	} else if sv := st.node.GetUserAgentBuildVersion().GetVersion(); sv != nil {
		// Envoy sends its version as numbers, not a string.
		client += fmt.Sprintf(" %d.%d.%d", sv.GetMajorNumber(), sv.GetMinorNumber(), sv.GetPatch())
	}
	args := []any{"cluster", st.node.GetCluster(), "group", group, "client", bounded(client, maxLogged), "peer", st.conn.Remote, "kind", st.kind()}
	if !st.ident.Verified() {
		// A verified identity is on every line of the stream already.
		args = append(args, "identity", "none")
	}
	st.logAt(slog.LevelInfo, "proxy connected", args...)
}

// logClosed says a proxy's stream ended, why, and how long it lasted.
func (st *stream) logClosed(err error) {
	reason := st.closedReason(err)
	args := []any{"reason", reason, "connected_for", time.Since(st.opened).Round(time.Millisecond).String(), "kind", st.kind()}
	if reason == ClosedError || reason == ClosedRefused {
		args = append(args, "error", bounded(err.Error(), maxLogged))
	}
	st.logAt(slog.LevelInfo, "proxy disconnected", args...)
}

// logAt logs at level, or at debug level for a REST poll: a poll is a
// stream of its own, and an Envoy polls every type every second or so, so
// a line per poll would fill the log (and anyone who reaches the port
// could make it).
func (st *stream) logAt(level slog.Level, msg string, args ...any) {
	if st.quiet {
		level = slog.LevelDebug
	}
	st.log().Log(context.Background(), level, msg, args...)
}

// closedReason classifies a stream's end.
func (st *stream) closedReason(err error) string {
	var r *refusal
	switch {
	case st.srv.life.Err() != nil:
		return ClosedByShutdown
	case errors.Is(err, errDrained):
		// Drain ended it: the replica hands its proxies to others.
		return ClosedDraining
	case errors.As(err, &r) && r.reason == RefusedStalled, st.tconn != nil && st.tconn.Evicted():
		// The stream stalled, or another on its connection did.
		return ClosedEvicted
	case errors.As(err, &r):
		return ClosedRefused
	case err == nil, errors.Is(err, context.Canceled), status.Code(err) == codes.Canceled:
		return ClosedByClient
	}
	return ClosedError
}
