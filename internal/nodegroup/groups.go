// Package nodegroup is who gets what, as plain values: the node as group
// rules and rollout stages see it, the group rules and how a node resolves
// to one, and a group's rollout policy with the shares it stages by. It
// imports nothing of Pylon and no Envoy types: the fleet converts a node
// and applies the rules; the model and the config refer to these types
// where a value is a group rule.
package nodegroup

import (
	"path"
)

// Node is what group rules can match on, taken from the node a proxy sends
// on its first request.
type Node struct {
	ID       string
	Cluster  string
	Metadata map[string]string // the node metadata's string values
	Region   string
	Zone     string
	SubZone  string
	// Identities are the names the node's verified client certificate
	// proves (its SPIFFE ID and DNS SANs); empty over a connection without
	// one. Unlike every other field, the node cannot choose them.
	Identities []string
}

// Match is a group's rule; every field set must match (an empty field
// matches anything).
type Match struct {
	// ID is a glob over the node id ("edge-*", "sidecar-?-payments").
	ID string `json:"id,omitempty"`
	// Cluster must equal the node's cluster.
	Cluster string `json:"cluster,omitempty"`
	// Metadata values must equal the node metadata's string values.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Locality fields must equal the node's.
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

// Matches reports whether n satisfies every field of m.
func (m Match) Matches(n Node) bool {
	if m.ID != "" {
		if ok, err := path.Match(m.ID, n.ID); err != nil || !ok {
			return false
		}
	}
	if m.Cluster != "" && m.Cluster != n.Cluster {
		return false
	}
	for k, v := range m.Metadata {
		if n.Metadata[k] != v {
			return false
		}
	}
	return (m.Region == "" || m.Region == n.Region) &&
		(m.Zone == "" || m.Zone == n.Zone) &&
		(m.SubZone == "" || m.SubZone == n.SubZone)
}

// Group is a set of nodes that receive the same configuration.
type Group struct {
	Name  string
	Match Match
	// Default makes the group take nodes that match no other group.
	Default bool
	// Scope, when set, limits what the group sees: per resource type URL,
	// glob patterns of the names it starts from; everything those name is
	// included too. Types not listed contribute only what is named.
	Scope map[string][]string
	// SuppressDeltaNotFound stops delta streams of the group's nodes from
	// listing subscribed names that do not exist in removed_resources.
	SuppressDeltaNotFound bool
	// Identities, when set, are glob patterns of the verified identities
	// allowed to join the group: a node whose certificate proves none of
	// them is not taken, whatever its id or metadata claim, and falls
	// through to the next rule. Empty: any node, verified or not.
	Identities []string `json:"identities,omitempty"`
	// Rollout, when set, stages each change of the group's snapshot
	// across its nodes (see Rollout); nil: every node gets it at once.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Clients are the proxyless gRPC implementations the group states it
	// serves (`clients:`: grpc-go, grpc-core, grpc-js); empty: none
	// stated. Only shown: status compares them with the clients connected.
	Clients []string `json:"clients,omitempty"`
}

// Groups are the group rules in order: the first whose Match matches wins,
// then the default group.
type Groups []Group

// Rule is how a group takes nodes, and no more (neither its resources nor
// its rollout): what GET /v1/groups publishes and a relay in front reads,
// to key its proxies by the group the server would put them in.
type Rule struct {
	Name       string   `json:"name"`
	Match      Match    `json:"match"`
	Default    bool     `json:"default,omitempty"`
	Identities []string `json:"identities,omitempty"`
}

// Rules is GET /v1/groups's body: the served fleet's version and its
// group rules, in the order they are tried.
type Rules struct {
	Version string `json:"version"`
	Groups  []Rule `json:"groups"`
}

// Rule is g's rule.
func (g Group) Rule() Rule {
	return Rule{Name: g.Name, Match: g.Match, Default: g.Default, Identities: g.Identities}
}

// Resolve returns the index of the group n belongs to, or -1 for none.
func (gs Groups) Resolve(n Node) int {
	def := -1
	for i, g := range gs {
		if len(g.Identities) > 0 && !AnyMatch(g.Identities, n.Identities) {
			continue
		}
		if g.Default {
			def = i
			continue
		}
		if g.Match.Matches(n) {
			return i
		}
	}
	return def
}

// AnyMatch reports whether any of names matches any of the glob patterns
// (path.Match syntax, where "*" stops at "/": write "spiffe://td/ns/*/sa/*").
func AnyMatch(patterns, names []string) bool {
	for _, p := range patterns {
		for _, n := range names {
			if ok, err := path.Match(p, n); err == nil && ok {
				return true
			}
		}
	}
	return false
}
