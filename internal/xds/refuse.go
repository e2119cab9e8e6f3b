package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/protocol"
)

// Reasons a stream is refused: the bounded values of the refusal metric's
// label and of Event.Reason.
const (
	// RefusedIdentity: the node's id or cluster is not what its verified
	// client certificate proves (Options.Identity).
	RefusedIdentity = "identity_mismatch"
	// RefusedBadNode: the node's id, cluster, locality, user_agent_name
	// or user_agent_version is too long, or its metadata holds more
	// string fields, or more bytes of them, than the stream keeps.
	RefusedBadNode = "bad_node"
	// RefusedResourceNames: a request named more resources than
	// Options.MaxResourceNames.
	RefusedResourceNames = "resource_names"
	// RefusedStalled: a response stayed unsent past the send bound because
	// the client does not read; its connection was closed.
	RefusedStalled = "stalled"
	// RefusedFlood: more requests a second than Options.MaxRequestsPerSecond.
	RefusedFlood = "flood"
	// RefusedNoRequest: the stream sent no request within
	// Options.FirstRequestTimeout of its opening.
	RefusedNoRequest = "no_request"
	// RefusedBusy: no initial-send slot or new-stream turn within
	// Options.AdmissionWait; the client should retry.
	RefusedBusy = "busy"
)

// IgnoredUnknownType is the reason of a RequestIgnored event: a request
// for a type Pylon does not serve on that kind of stream (X2).
const IgnoredUnknownType = "unknown_type"

// refusal is an error that ends a stream on purpose: the client gets code
// and message; the server logs it once per node and reason, counts it and
// shows it in status.
type refusal struct {
	reason string
	st     *grpcstatus.Status
}

func (r *refusal) Error() string                  { return r.st.Message() }
func (r *refusal) GRPCStatus() *grpcstatus.Status { return r.st }

func refuse(reason string, code codes.Code, format string, args ...any) error {
	return &refusal{reason: reason, st: grpcstatus.New(code, bounded(fmt.Sprintf(format, args...), maxDetail))}
}

// Bounds on what a client can make the server write per line: a NACK's
// error_detail, a refusal's message, a node id or a type URL.
const (
	maxDetail = 4 << 10
	maxLogged = 256
	// maxNodeField bounds a node's id, cluster, locality and user agent
	// name and version: they are in every log line and status entry of
	// the stream, the stream keeps them for its life (the locality for
	// group rules and reports), and the status tracker keeps some after
	// the stream ends.
	maxNodeField = 1024
	// maxMetadataKeys and maxMetadataBytes bound the node metadata's
	// string fields (keys and values), which the stream keeps for its
	// life because group and rollout rules match them. Other kinds of
	// values are not kept and so not counted. Istio's sidecars send a few
	// dozen string fields of a few KiB in all.
	maxMetadataKeys  = 128
	maxMetadataBytes = 16 << 10
)

// bounded cuts s to at most limit bytes (on a rune boundary), saying how
// long it was.
func bounded(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes in all)", s[:cut], len(s))
}

// onceKey keeps log-deduplication keys small whatever a client sends: a
// long key is replaced by its hash.
func onceKey(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	if n <= maxLogged {
		k := ""
		for _, p := range parts {
			k += p + "\x00"
		}
		return k
	}
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "#" + hex.EncodeToString(h.Sum(nil))
}

// busy turns the admission's RESOURCE_EXHAUSTED into a refusal, leaving
// other errors (the client going away) as they are.
func busy(err error) error {
	if s, ok := grpcstatus.FromError(err); ok && s.Code() == codes.ResourceExhausted {
		return refuse(RefusedBusy, codes.ResourceExhausted, "%s", s.Message())
	}
	return err
}

// checkNode refuses a node whose id, cluster or user agent is too long to
// log or keep, and,
// under an identity rule, a node its verified certificate does not prove.
// A connection without a verified certificate may still claim any node:
// it gets no Secrets (unless InsecureServeSecrets) and joins no group that
// declares identities; requiring certificates is the TLS layer's job.
func (st *stream) checkNode(node *corev3.Node) error {
	for _, f := range []struct{ name, v string }{
		{"id", node.GetId()}, {"cluster", node.GetCluster()},
		{"locality.region", node.GetLocality().GetRegion()}, {"locality.zone", node.GetLocality().GetZone()},
		{"locality.sub_zone", node.GetLocality().GetSubZone()},
		{"user_agent_name", node.GetUserAgentName()}, {"user_agent_version", node.GetUserAgentVersion()},
	} {
		if len(f.v) > maxNodeField {
			return refuse(RefusedBadNode, codes.InvalidArgument, "node.%s is %d bytes; Pylon accepts at most %d", f.name, len(f.v), maxNodeField)
		}
	}
	if err := checkMetadata(node); err != nil {
		return err
	}
	rule := st.srv.opts.Identity
	switch {
	case rule == nil:
	case st.ident.Verified():
		if err := rule.Check(st.ident, node.GetId(), node.GetCluster()); err != nil {
			return refuse(RefusedIdentity, codes.PermissionDenied, "%s", err.Error())
		}
	case st.srv.logged.first(onceKey("nocert", node.GetId())):
		st.log().Info("node connected without a verified client certificate: it gets no Secrets and joins no group that declares identities",
			"node", node.GetId(), "insecure_serve_secrets", st.srv.opts.InsecureServeSecrets)
	}
	return nil
}

// checkMetadata refuses a node whose metadata's string fields, the part
// of it a stream keeps, are more or longer than maxMetadataKeys and
// maxMetadataBytes.
func checkMetadata(node *corev3.Node) error {
	keys, size := 0, 0
	for k, v := range node.GetMetadata().GetFields() {
		if sv := v.GetStringValue(); sv != "" {
			keys++
			size += len(k) + len(sv)
		}
	}
	switch {
	case keys > maxMetadataKeys:
		return refuse(RefusedBadNode, codes.InvalidArgument, "node.metadata has %d string fields; Pylon accepts at most %d", keys, maxMetadataKeys)
	case size > maxMetadataBytes:
		return refuse(RefusedBadNode, codes.InvalidArgument, "node.metadata's string fields are %d bytes (keys and values); Pylon accepts at most %d", size, maxMetadataBytes)
	}
	return nil
}

// claimedNode is what the stream keeps and reports of a node before it is
// accepted: the fields people read (id, cluster, user agent), each bounded.
// A refused stream's event carries it and the status tracker keeps it
// after the stream is gone, so the node as sent (up to a 4 MiB request)
// must not be what stays.
func claimedNode(node *corev3.Node) *corev3.Node {
	return &corev3.Node{
		Id:      bounded(node.GetId(), maxNodeField),
		Cluster: bounded(node.GetCluster(), maxNodeField),
		// Only the name and the string version: the rest of the node
		// (metadata, build version, extensions) is not reported.
		UserAgentName:        bounded(node.GetUserAgentName(), maxNodeField),
		UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: bounded(node.GetUserAgentVersion(), maxNodeField)},
	}
}

// keptNode is what a stream keeps of its node once identified: the fields
// that are logged and reported (id, cluster, locality, user agent). Group
// rules read the node's metadata once, through fleet.NodeOf.
func keptNode(node *corev3.Node) *corev3.Node {
	kept := &corev3.Node{Id: node.GetId(), Cluster: node.GetCluster(), UserAgentName: node.GetUserAgentName()}
	if l := node.GetLocality(); l != nil {
		kept.Locality = &corev3.Locality{Region: l.GetRegion(), Zone: l.GetZone(), SubZone: l.GetSubZone()}
	}
	switch v := node.GetUserAgentVersionType().(type) {
	case *corev3.Node_UserAgentVersion:
		kept.UserAgentVersionType = v
	case *corev3.Node_UserAgentBuildVersion:
		kept.UserAgentVersionType = &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{Version: v.UserAgentBuildVersion.GetVersion()}}
	}
	return kept
}

// maxNameBytes bounds one resource name a client sends. Pylon's own names
// are at most 512 bytes (the config's bound) and a VHDS alias adds a host
// (at most 255 bytes and a port): a longer name is no resource's, and
// would only be held, and echoed (a VHDS alias answered as not found),
// for as long as the stream lasts.
const maxNameBytes = 4096

// maxGlobs bounds the xdstp:// glob collections one subscription to a
// type holds (X46): each is matched against the type's resources as the
// config changes. A client names a handful.
const maxGlobs = 64

// checkNameBytes refuses a request naming a resource longer than any.
func (st *stream) checkNameBytes(names []string, field, typeURL string) error {
	for _, n := range names {
		if err := checkNameLen(n, field, typeURL); err != nil {
			return err
		}
	}
	return nil
}

// checkNameLen is checkNameBytes for one name.
func checkNameLen(name, field, typeURL string) error {
	if len(name) > maxNameBytes {
		return refuse(RefusedResourceNames, codes.ResourceExhausted, "a request for %s names a resource of %d bytes in %s; Pylon accepts names of at most %d bytes", bounded(typeURL, maxLogged), len(name), field, maxNameBytes)
	}
	return nil
}

// checkGlobs refuses a subscription holding more glob collections than
// maxGlobs.
func (st *stream) checkGlobs(sub *protocol.Subscription, typeURL string) error {
	if sub != nil && len(sub.Globs) > maxGlobs {
		return refuse(RefusedResourceNames, codes.ResourceExhausted, "a subscription to %s holds %d xdstp:// glob collections; Pylon accepts at most %d", bounded(typeURL, maxLogged), len(sub.Globs), maxGlobs)
	}
	return nil
}

// checkNames refuses a request naming more resources than the server
// accepts in one request (field is the request field, for the message).
func (st *stream) checkNames(n int, field, typeURL string) error {
	if limit := st.srv.opts.MaxResourceNames; n > limit {
		return refuse(RefusedResourceNames, codes.ResourceExhausted, "a request for %s names %d resources in %s; Pylon accepts at most %d", bounded(typeURL, maxLogged), n, field, limit)
	}
	return nil
}

// refused reports a stream ended on purpose: logged once per node and
// reason (bounded), and to the observer for metrics and status.
func (st *stream) refused(r *refusal) {
	node := st.node
	if node == nil {
		node = st.claimed
	}
	if st.srv.logged.first(onceKey("refused", r.reason, node.GetId())) {
		st.log().Warn("refusing xDS stream", "reason", r.reason, "code", r.st.Code().String(), "detail", r.st.Message(),
			"node", bounded(node.GetId(), maxLogged), "peer", st.conn.Remote, "identity", st.ident.String())
	}
	st.observe(&status.Event{Kind: status.StreamRefused, Reason: r.reason, Detail: r.st.Message()})
}
