package nodegroup

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Rollout is a group's staged rollout policy: a change to the group's
// snapshot reaches the nodes of the first stage, then, each stage having
// baked, the next, until every node runs it.
type Rollout struct {
	Stages []Stage `json:"stages"`
	Halt   Halt    `json:"halt,omitzero"`
}

// Stage is one step of a rollout. A node takes part from the first stage
// that takes it on: its hash falls under the stage's share, or it matches
// the stage's selector. A stage keeps every node of the stages before it,
// so membership only grows.
type Stage struct {
	// Share is the fraction of the group's nodes, by node id hash.
	Share Share `json:"share,omitempty"`
	// Selector takes the nodes it matches (a canary stage).
	Selector *Match `json:"selector,omitempty"`
	// Bake is how long the stage runs before the next one starts.
	Bake Duration `json:"bake,omitempty"`
}

// Halt says what stops a rollout and rolls its stage back.
type Halt struct {
	// OnNACK halts on NACKs by nodes of the stage (default true).
	OnNACK *bool `json:"on_nack,omitempty"`
	// MinNodes is how many distinct nodes of the stage must NACK the
	// change before it halts (0 or 1: the first NACK halts).
	MinNodes int `json:"min_nodes,omitempty"`
	// NotACKed halts when more than Count nodes of the stage have not
	// ACKed the new version Within after it was sent to them.
	NotACKed *NotACKed `json:"not_acked,omitempty"`
}

// NotACKed is the halt condition on nodes slow to ACK.
type NotACKed struct {
	Count  int      `json:"count"`
	Within Duration `json:"within"`
}

// HaltsOnNACK reports whether NACKs halt the rollout.
func (h Halt) HaltsOnNACK() bool { return h.OnNACK == nil || *h.OnNACK }

// NACKNodes is how many distinct nodes of the stage must NACK the change
// for it to halt: MinNodes, at least 1.
func (h Halt) NACKNodes() int { return max(h.MinNodes, 1) }

// Share is a fraction in [0, 1], written "10%" or as a percentage number (10).
type Share float64

// UnmarshalJSON reads "12.5%" or 12.5 as 0.125. Its errors quote the value
// so that the config decoder finds the field.
func (s *Share) UnmarshalJSON(b []byte) error {
	raw := strings.TrimSpace(string(b))
	var str string
	if json.Unmarshal(b, &str) == nil {
		raw = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(str), "%"))
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil || v < 0 || v > 100 {
		return fmt.Errorf("value %q is not a share (write a percentage from 0%% to 100%%, such as \"10%%\")", strings.Trim(string(b), `"`))
	}
	*s = Share(v / 100)
	return nil
}

// MarshalJSON writes the share as a percentage string.
func (s Share) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatFloat(float64(s)*100, 'f', -1, 64) + "%")
}

// NodeShare maps a node id to [0, 1) by a hash: stable across restarts,
// replicas and reconnects, so a node stays in its stage.
func NodeShare(id string) float64 {
	sum := sha256.Sum256([]byte(id))
	// 53 bits: exactly representable as a float64 fraction.
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// Takes reports whether a node runs the new version while the rollout is
// at stage (1 is the first stage; 0 none; len(Stages) the last). A node
// taken at one stage is taken at every later one.
func (r *Rollout) Takes(stage int, n Node) bool {
	if r == nil || stage <= 0 {
		return false
	}
	share := NodeShare(n.ID)
	for i := 0; i < stage && i < len(r.Stages); i++ {
		s := r.Stages[i]
		if share < float64(s.Share) || (s.Selector != nil && s.Selector.Matches(n)) {
			return true
		}
	}
	return false
}

// JoinsAt returns the first stage (1-based) that takes n, and why it does
// ("its selector matches", "its node id's share 4.2% is under 10%"); 0
// and why no stage does (the node gets the change when the rollout
// completes). Takes(stage, n) is JoinsAt(n) in 1..stage.
func (r *Rollout) JoinsAt(n Node) (int, string) {
	if r == nil {
		return 0, "the group has no rollout policy"
	}
	share := NodeShare(n.ID)
	for i, s := range r.Stages {
		if share < float64(s.Share) {
			return i + 1, fmt.Sprintf("its node id's share %s is under the stage's %s", percent(share), percent(float64(s.Share)))
		}
		if s.Selector != nil && s.Selector.Matches(n) {
			return i + 1, "it matches the stage's selector"
		}
	}
	return 0, fmt.Sprintf("no stage takes it (its node id's share is %s): it gets the change when the rollout completes", percent(share))
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" }
