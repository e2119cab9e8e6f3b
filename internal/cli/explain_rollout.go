package cli

import (
	"encoding/json"
	"fmt"
	"net/url"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	rolloutctl "github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/route"
)

// rolloutNote is what explain says of a staged rollout of the node's
// group: which version the node runs, and why.
type rolloutNote struct {
	Group  string `json:"group"`
	Stage  int    `json:"stage"`
	Stages int    `json:"stages"`
	Halted string `json:"halted,omitempty"`
	// Version is "new", "previous", or "either" (a group was named, not a
	// node); Runs is that version (a config version, as `pylon rollout
	// status` shows them).
	Version string `json:"version"`
	Runs    string `json:"runs,omitempty"`
	Why     string `json:"why"`
}

// explainedVersion is, for a group in a staged rollout on the running
// Pylon, which version node runs and the resources of that version:
// explain must follow what the node holds, which for a node outside the
// stage is the previous version. res is returned as is when the group is
// in no rollout.
func explainedVersion(c adminClient, f *fleet.Fleet, g *fleet.Group, node *config.TestNode, res *route.Resources) (*rolloutNote, *route.Resources, error) {
	var list struct {
		Rollouts []rolloutctl.Status `json:"rollouts"`
	}
	if err := c.Get("/v1/rollouts", &list); err != nil {
		return nil, nil, err
	}
	var st *rolloutctl.Status
	for i := range list.Rollouts {
		if list.Rollouts[i].Group == g.Name {
			st = &list.Rollouts[i]
		}
	}
	_, rule := f.Lookup(g.Name)
	if st == nil || rule == nil || rule.Rollout == nil {
		return nil, res, nil
	}
	note := &rolloutNote{Group: g.Name, Stage: st.Stage, Stages: st.Stages, Halted: st.Halted}
	if node == nil {
		note.Version = "either"
		note.Why = fmt.Sprintf("the nodes its stages take so far run the new version %s, the others the previous %s: give --node-id to know which; explained here: the new one", st.To, st.From)
		return note, res, nil
	}
	n := fleet.NodeOf(compile.NodeProto(node))
	n.Identities = node.Identities
	join, why := rule.Rollout.JoinsAt(n)
	if join > 0 && join <= st.Stage {
		note.Version, note.Runs, note.Why = "new", st.To, fmt.Sprintf("stage %d takes it: %s", join, why)
		return note, res, nil
	}
	note.Version, note.Runs = "previous", st.From
	switch {
	case join == 0:
		note.Why = why
	case st.Halted != "":
		note.Why = fmt.Sprintf("it joins at stage %d (%s), and the rollout is halted at stage %d", join, why, st.Stage)
	default:
		note.Why = fmt.Sprintf("it joins at stage %d (%s)", join, why)
	}
	prev, err := previousResources(c, g.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("node %s runs the previous version of group %s: %w", node.ID, g.Name, err)
	}
	return note, prev, nil
}

// previousResources reads the previous version of a group in a rollout
// from the running Pylon (GET /config?previous=true, redacted: routing
// needs no key material).
func previousResources(c adminClient, group string) (*route.Resources, error) {
	var dump struct {
		Groups []struct {
			Resources map[string][]json.RawMessage `json:"resources"`
		} `json:"groups"`
	}
	if err := c.Get("/config?previous=true&group="+url.QueryEscape(group), &dump); err != nil {
		return nil, err
	}
	if len(dump.Groups) != 1 {
		return nil, fmt.Errorf("/config?previous=true: %d groups, want 1", len(dump.Groups))
	}
	in := dump.Groups[0].Resources
	res := &route.Resources{
		Listeners: map[string]*listenerv3.Listener{},
		Routes:    map[string]*routev3.RouteConfiguration{},
		Clusters:  map[string]*clusterv3.Cluster{},
		Endpoints: map[string]*endpointv3.ClusterLoadAssignment{},
	}
	if err := decodeAll(in["Listener"], res.Listeners, func(m *listenerv3.Listener) string { return m.GetName() }); err != nil {
		return nil, err
	}
	if err := decodeAll(in["RouteConfiguration"], res.Routes, func(m *routev3.RouteConfiguration) string { return m.GetName() }); err != nil {
		return nil, err
	}
	if err := decodeAll(in["Cluster"], res.Clusters, func(m *clusterv3.Cluster) string { return m.GetName() }); err != nil {
		return nil, err
	}
	if err := decodeAll(in["ClusterLoadAssignment"], res.Endpoints, func(m *endpointv3.ClusterLoadAssignment) string { return m.GetClusterName() }); err != nil {
		return nil, err
	}
	return res, nil
}

// decodeAll decodes each dumped resource into into, by name.
func decodeAll[T any, P interface {
	*T
	proto.Message
}](raw []json.RawMessage, into map[string]P, name func(P) string) error {
	for _, r := range raw {
		m := P(new(T))
		if err := protojson.Unmarshal(r, m); err != nil {
			return fmt.Errorf("a %s of the previous version: %w", m.ProtoReflect().Descriptor().Name(), err)
		}
		into[name(m)] = m
	}
	return nil
}
