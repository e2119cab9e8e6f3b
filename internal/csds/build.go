package csds

import (
	"fmt"
	"regexp"
	"strings"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// maxRegex bounds a node id regex (RE2: linear time, but the program's size
// grows with the pattern).
const maxRegex = 1024

// nodeMatch reports whether a node id is asked for.
type nodeMatch func(id string) bool

// matcher turns the request's node matchers into one predicate: any of them
// (OR, as the proto says); none means every node.
func (s *Server) matcher(req *statusv3.ClientStatusRequest) (nodeMatch, error) {
	if err := req.ValidateAll(); err != nil {
		return nil, invalid("request", redact.String(err.Error()))
	}
	ms := req.GetNodeMatchers()
	if len(ms) > maxMatchers {
		return nil, invalid("node_matchers", fmt.Sprintf("%d matchers, at most %d", len(ms), maxMatchers))
	}
	if len(ms) == 0 {
		return func(string) bool { return true }, nil
	}
	preds := make([]nodeMatch, 0, len(ms))
	for i, m := range ms {
		p, err := nodeMatcher(m)
		if err != nil {
			return nil, invalid(fmt.Sprintf("node_matchers[%d]", i), err.Error())
		}
		preds = append(preds, p)
	}
	return func(id string) bool {
		for _, p := range preds {
			if p(id) {
				return true
			}
		}
		return false
	}, nil
}

// nodeMatcher supports node_id; node_metadatas are refused rather than
// ignored, since the tracker keeps no metadata and ignoring them would
// answer for nodes the caller did not ask about.
func nodeMatcher(m *matcherv3.NodeMatcher) (nodeMatch, error) {
	if len(m.GetNodeMetadatas()) > 0 {
		return nil, fmt.Errorf("node_metadatas: not supported by Pylon (match on node_id)")
	}
	if m.GetNodeId() == nil {
		return func(string) bool { return true }, nil
	}
	return stringMatcher(m.GetNodeId())
}

// stringMatcher implements envoy.type.matcher.v3.StringMatcher.
func stringMatcher(sm *matcherv3.StringMatcher) (nodeMatch, error) {
	fold := func(s string) string { return s }
	if sm.GetIgnoreCase() {
		fold = strings.ToLower
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		want := fold(p.Exact)
		return func(id string) bool { return fold(id) == want }, nil
	case *matcherv3.StringMatcher_Prefix:
		want := fold(p.Prefix)
		return func(id string) bool { return strings.HasPrefix(fold(id), want) }, nil
	case *matcherv3.StringMatcher_Suffix:
		want := fold(p.Suffix)
		return func(id string) bool { return strings.HasSuffix(fold(id), want) }, nil
	case *matcherv3.StringMatcher_Contains:
		want := fold(p.Contains)
		return func(id string) bool { return strings.Contains(fold(id), want) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		re := p.SafeRegex.GetRegex()
		if len(re) > maxRegex {
			return nil, fmt.Errorf("node_id.safe_regex.regex: %d bytes, at most %d", len(re), maxRegex)
		}
		// Envoy's regexes match the whole string.
		c, err := regexp.Compile("^(?:" + re + ")$")
		if err != nil {
			return nil, fmt.Errorf("node_id.safe_regex.regex: %v", err)
		}
		return c.MatchString, nil
	}
	return nil, fmt.Errorf("node_id: unsupported match pattern %T", sm.GetMatchPattern())
}

// build answers for the open streams whose node matches, one ClientConfig
// per node (a node's per-type streams merged), in the order of the streams
// (sorted by node, so stable), at most MaxNodes of them and no further node
// once the answer holds MaxBytes; it returns how many matching nodes it
// left out. Once a node is left out, every later one is too, so an answer
// is always a prefix of the full one.
func (s *Server) build(streams []status.Stream, match nodeMatch, contents bool) (*statusv3.ClientStatusResponse, int) {
	resp := &statusv3.ClientStatusResponse{}
	order, byNode := nodesOf(streams, match)
	size, omitted := 0, 0
	for _, node := range order {
		if omitted > 0 || len(resp.Config) >= s.o.MaxNodes || (len(resp.Config) > 0 && size >= s.o.MaxBytes) {
			omitted++
			continue
		}
		first := &streams[byNode[node][0]]
		cc := &statusv3.ClientConfig{Node: &corev3.Node{Id: first.Node, Cluster: first.Cluster}}
		for _, i := range byNode[node] {
			for _, ty := range streams[i].Types {
				cc.GenericXdsConfigs = append(cc.GenericXdsConfigs, s.configs(ty, contents)...)
			}
		}
		n := proto.Size(cc)
		if len(resp.Config) > 0 && size+n > s.o.MaxBytes {
			omitted++
			continue
		}
		size += n
		resp.Config = append(resp.Config, cc)
	}
	return resp, omitted
}

// nodesOf groups the open streams whose node matches by node, nodes in
// the order they first appear.
func nodesOf(streams []status.Stream, match nodeMatch) ([]string, map[string][]int) {
	var order []string
	byNode := map[string][]int{}
	for i := range streams {
		st := &streams[i]
		if st.Gone != nil || !match(st.Node) {
			continue
		}
		if _, seen := byNode[st.Node]; !seen {
			order = append(order, st.Node)
		}
		byNode[st.Node] = append(byNode[st.Node], i)
	}
	return order, byNode
}

// configs is one entry per resource the type's last response carried (one
// without a name when it carried none), all with the type's state.
func (s *Server) configs(ty *status.Type, contents bool) []*statusv3.ClientConfig_GenericXdsConfig {
	base := s.entry(ty)
	if len(ty.LastSent) == 0 {
		return []*statusv3.ClientConfig_GenericXdsConfig{base}
	}
	out := make([]*statusv3.ClientConfig_GenericXdsConfig, 0, len(ty.LastSent))
	for _, m := range ty.LastSent {
		e := cloneEntry(base)
		e.Name = xdstype.NameOf(m)
		if contents {
			// Redacted here, whatever the caller: the tracker holds the
			// messages as sent, key material included.
			e.XdsConfig = s.redacted.get(m)
		}
		out = append(out, e)
	}
	return out
}

// entry is the per-type part of a resource's entry: its type URL, the
// version of the last response (what xds_config shows; for a NACK the
// rejected one, as CSDS defines ERROR), and its states.
func (s *Server) entry(ty *status.Type) *statusv3.ClientConfig_GenericXdsConfig {
	e := &statusv3.ClientConfig_GenericXdsConfig{
		TypeUrl:      s.typeURL(ty.Type),
		ConfigStatus: configStatus(ty.State),
		ClientStatus: clientStatus(ty),
	}
	// CSDS's STALE is "sent, no ACK or NACK yet": a later response not yet
	// answered is never SYNCED, even in the moment before the tracker
	// learns that the stream should hold it.
	if e.ConfigStatus == statusv3.ConfigStatus_SYNCED && e.ClientStatus != adminv3.ClientResourceStatus_ACKED {
		e.ConfigStatus = statusv3.ConfigStatus_STALE
	}
	at := ty.Sent
	if at != nil {
		e.VersionInfo = at.Version
		e.LastUpdated = timestamppb.New(at.At)
	}
	if a := ty.ACKed; a != nil && (at == nil || a.At.After(at.At)) {
		e.LastUpdated = timestamppb.New(a.At)
	}
	if n := ty.LastNACK; n != nil && ty.State == status.Nacked {
		e.LastUpdated = timestamppb.New(n.At)
		e.ErrorState = &adminv3.UpdateFailureState{
			LastUpdateAttempt: timestamppb.New(n.At),
			// The client wrote the detail; it may quote what it rejected.
			Details:     redact.String(n.Detail),
			VersionInfo: failedVersion(ty),
		}
	}
	return e
}

// failedVersion is the version the proxy rejected: the one last sent
// (a NACK's own version_info is what the proxy still runs).
func failedVersion(ty *status.Type) string {
	if ty.Sent != nil {
		return ty.Sent.Version
	}
	return ""
}

func cloneEntry(e *statusv3.ClientConfig_GenericXdsConfig) *statusv3.ClientConfig_GenericXdsConfig {
	c := &statusv3.ClientConfig_GenericXdsConfig{
		TypeUrl: e.TypeUrl, VersionInfo: e.VersionInfo, LastUpdated: e.LastUpdated,
		ConfigStatus: e.ConfigStatus, ClientStatus: e.ClientStatus, ErrorState: e.ErrorState,
	}
	return c
}

// typeURL maps the tracker's type name back to its URL.
func (s *Server) typeURL(name string) string {
	if u, ok := s.urls[name]; ok {
		return u
	}
	return name
}

// configStatus is the management server's view of a type on a stream.
func configStatus(state string) statusv3.ConfigStatus {
	switch state {
	case status.Synced:
		return statusv3.ConfigStatus_SYNCED
	case status.Stale:
		return statusv3.ConfigStatus_STALE
	case status.Nacked:
		return statusv3.ConfigStatus_ERROR
	case status.NotSent:
		return statusv3.ConfigStatus_NOT_SENT
	}
	return statusv3.ConfigStatus_UNKNOWN
}

// clientStatus is what the proxy last said of the type: NACKED when its
// last answer rejected it, ACKED when it ACKed the version last sent,
// REQUESTED while it asked and has not yet answered.
func clientStatus(ty *status.Type) adminv3.ClientResourceStatus {
	switch {
	case ty.State == status.Nacked:
		return adminv3.ClientResourceStatus_NACKED
	case ty.Sent != nil && ty.ACKed != nil && ty.ACKed.Version == ty.Sent.Version:
		return adminv3.ClientResourceStatus_ACKED
	}
	return adminv3.ClientResourceStatus_REQUESTED
}
