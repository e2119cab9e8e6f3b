package admin

import (
	"cmp"
	"hash/maphash"
	"net/http"
	"slices"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/redact"
	rolloutctl "github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/status"
)

// GET /rollout/staged is the dashboard's view of the staged rollouts: each
// group's stage, the time left of its bake, why it halted, and which nodes
// run the new version and which the previous one. GET /v1/rollouts has
// the controller's state; this adds the nodes, which take a walk of every
// stream: a read per page view, like /summary.

// maxStagedNodes bounds the node ids listed per rollout and version; the
// totals count them all. With more, the nodes named are those with a
// verified client certificate first, then the others in an order a
// client cannot foresee or choose (a hash of the id keyed by a seed the
// server draws at start), so ids picked to sort first (an unverified
// client's choice) cannot push the fleet's real nodes off the list.
const maxStagedNodes = 100

// stagedNote says what the node lists are.
const stagedNote = "Nodes by the version they ACKed of every type the change touched: this replica's open streams and the other replicas' as they last published them; neither: not ACKed either yet, or some types on each"

type stagedBody struct {
	Rollouts []stagedRollout `json:"rollouts"`
	Note     string          `json:"note"`
	// Replica is this replica, whose copy of each rollout the actions
	// sent to it drive; Shared is set with several replicas on etcd,
	// where each drives its own (docs/rollouts.md).
	Replica string `json:"replica"`
	Shared  bool   `json:"shared,omitempty"`
	// Partial says why other replicas' nodes may be missing.
	Partial string `json:"partial,omitempty"`
}

// stagedRollout is a rollout's state (rollout.Status, without where its
// previous config is saved) and its nodes.
type stagedRollout struct {
	Group     string    `json:"group"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Stage     int       `json:"stage"`
	Stages    int       `json:"stages"`
	EnteredAt time.Time `json:"enteredAt"`
	NextAt    time.Time `json:"nextAt,omitzero"`
	// NextInSeconds is the bake's time left, by the server's clock (0 when
	// halted): the page shows it without trusting the browser's clock.
	NextInSeconds float64      `json:"nextInSeconds"`
	Halted        string       `json:"halted,omitempty"`
	HaltedAt      time.Time    `json:"haltedAt,omitzero"`
	HaltedStage   int          `json:"haltedStage,omitempty"`
	Detail        string       `json:"detail,omitempty"`
	Supersede     bool         `json:"supersede,omitempty"`
	Nodes         versionNodes `json:"nodes"`
}

type versionNodes struct {
	New      nodeList `json:"new"`
	Previous nodeList `json:"previous"`
	Neither  nodeList `json:"neither"`
}

// nodeList is at most maxStagedNodes node ids (picked as maxStagedNodes
// says), sorted, and how many there are.
type nodeList struct {
	Total int      `json:"total"`
	Nodes []string `json:"nodes"`
}

// staged serves GET /rollout/staged; seed keys which nodes are named
// (maxStagedNodes).
func (o Options) staged(seed maphash.Seed) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body := stagedBody{Rollouts: []stagedRollout{}, Note: stagedNote, Replica: o.Identifier, Shared: o.Fleet != nil}
		if o.Rollouts == nil {
			writeJSON(w, http.StatusOK, body)
			return
		}
		now := time.Now()
		all := o.Rollouts.Status()
		var streams []status.Stream
		if len(all) > 0 {
			streams, body.Partial = o.allStreams()
		}
		f := o.Fleets.Current()
		for _, s := range all {
			body.Rollouts = append(body.Rollouts, stagedOf(s, now, nodesOn(f, s.Group, streams, seed)))
		}
		writeJSON(w, http.StatusOK, body)
	}
}

// allStreams is this replica's streams and the other replicas'.
func (o Options) allStreams() ([]status.Stream, string) {
	streams := o.Proxies.Streams()
	if o.Fleet == nil {
		return streams, ""
	}
	remote, partial := o.Fleet.Remote()
	for _, r := range remote {
		streams = append(streams, r.Stream())
	}
	return streams, partial
}

// stagedOf is s as the view shows it: the detail (a NACK's error, which
// may quote the config) redacted.
func stagedOf(s rolloutctl.Status, now time.Time, nodes versionNodes) stagedRollout {
	out := stagedRollout{
		Group: s.Group, From: s.From, To: s.To, Stage: s.Stage, Stages: s.Stages, EnteredAt: s.EnteredAt, NextAt: s.NextAt,
		Halted: s.Halted, HaltedAt: s.HaltedAt, HaltedStage: s.HaltedStage, Detail: redact.String(s.Detail), Supersede: s.Supersede, Nodes: nodes,
	}
	if s.Halted == "" && !s.NextAt.IsZero() {
		out.NextInSeconds = max(0, s.NextAt.Sub(now).Seconds())
	}
	return out
}

// nodesOn sorts the nodes of group's open streams by the version they
// ACKed of the types its rollout changes, between the fleet's new
// snapshot and the one the nodes outside the stage get.
func nodesOn(f *fleet.Fleet, group string, streams []status.Stream, seed maphash.Seed) versionNodes {
	out := versionNodes{New: nodeList{Nodes: []string{}}, Previous: nodeList{Nodes: []string{}}, Neither: nodeList{Nodes: []string{}}}
	changed := changedTypes(f, group)
	if len(changed) == 0 {
		return out
	}
	const onNew, onPrev, onNeither = 1, 2, 3
	byNode := map[string]int{}
	verified := map[string]bool{}
	for _, s := range streams {
		if s.Gone != nil || s.Group != group {
			continue
		}
		c, ok := versionOf(s, changed)
		if !ok {
			continue
		}
		if was, seen := byNode[s.Node]; seen && was != c {
			c = onNeither // its streams disagree
		}
		byNode[s.Node] = c
		if s.Identity != "" {
			verified[s.Node] = true
		}
	}
	lists := map[int]*nodeList{onNew: &out.New, onPrev: &out.Previous, onNeither: &out.Neither}
	for c, l := range lists {
		var ns []namedNode
		for n, on := range byNode {
			if on == c {
				ns = append(ns, namedNode{n, verified[n], maphash.String(seed, n)})
			}
		}
		*l = named(ns)
	}
	return out
}

// namedNode is a node id and what picks it to be named: a verified client
// certificate, then its keyed hash.
type namedNode struct {
	id       string
	verified bool
	hash     uint64
}

// named is the list of ns: at most maxStagedNodes ids, picked verified
// first and then by hash, sorted.
func named(ns []namedNode) nodeList {
	if len(ns) > maxStagedNodes {
		slices.SortFunc(ns, func(a, b namedNode) int {
			if a.verified != b.verified {
				if a.verified {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.id, b.id))
		})
	}
	l := nodeList{Total: len(ns), Nodes: []string{}}
	for _, n := range ns[:min(len(ns), maxStagedNodes)] {
		l.Nodes = append(l.Nodes, n.id)
	}
	slices.Sort(l.Nodes)
	return l
}

// changedTypes maps each type (by its abbreviation, as streams name
// them) whose version differs between group's previous and new snapshot
// to the two versions; nil when the group is not staged.
func changedTypes(f *fleet.Fleet, group string) map[string][2]string {
	if f == nil {
		return nil
	}
	g, _ := f.Lookup(group)
	prev, _ := f.Previous(group)
	if g == nil || prev == nil {
		return nil
	}
	out := map[string][2]string{}
	for _, set := range g.Snapshot.Sets() {
		if p := prev.Set(set.Type().URL).Version(); p != set.Version() {
			out[set.Type().Abbrev] = [2]string{p, set.Version()}
		}
	}
	return out
}

// versionOf says which version stream s runs of the changed types: 1 the
// new one in all of them, 2 the previous one in all, 3 neither; false when
// it uses none of them.
func versionOf(s status.Stream, changed map[string][2]string) (int, bool) {
	uses, allNew, allPrev := false, true, true
	for _, t := range s.Types {
		v, ok := changed[t.Type]
		if !ok {
			continue
		}
		uses = true
		acked := ""
		if t.ACKed != nil {
			// A stream's own version (part of a set) names the set's.
			if acked = t.ACKed.Set; acked == "" {
				acked = t.ACKed.Version
			}
		}
		allNew, allPrev = allNew && acked == v[1], allPrev && acked == v[0]
	}
	switch {
	case !uses:
		return 0, false
	case allNew:
		return 1, true
	case allPrev:
		return 2, true
	}
	return 3, true
}
