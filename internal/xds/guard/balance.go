package guard

import (
	"fmt"
	"math/rand/v2"
)

// BalanceSlack is how many streams above the fleet's mean a replica keeps
// at least before it refuses or sheds, whatever the 10%: with a small
// fleet, 10% of the mean is less than a stream, and a count read a period
// late would move the same few streams back and forth.
const BalanceSlack = 2

// Load is the fleet as one replica last read it from the replicas'
// summaries (fleetstatus): the replicas of its shard that are live, this
// one included, and their xDS streams, this one's counted as open now.
type Load struct {
	Replicas int
	Streams  int
	// Least is the fewest streams another live replica holds: while one
	// holds under 90% of the mean, the others come down to the mean, not
	// only to their target (a new replica would otherwise stay at what
	// the target leaves it: 800 of 3,000 on three).
	Least int
	// Fresh: the summaries were read within their bound. A replica that
	// cannot read them (etcd away) knows nothing of the others' load and
	// neither refuses nor sheds.
	Fresh bool
}

// Target is the most streams a replica of l should hold:
// ceil(Streams / Replicas x 1.1), and at least BalanceSlack more than the
// mean. ok is false when there is nothing to balance (a stale count, a
// lone replica): the replica then takes every stream and sheds none.
func (l Load) Target() (target int, ok bool) {
	if !l.Fresh || l.Replicas < 2 || l.Streams <= 0 {
		return 0, false
	}
	// In integers: ceil(s x 11 / (r x 10)).
	r, s := l.Replicas, l.Streams
	target = (s*11 + r*10 - 1) / (r * 10)
	mean := (s + r - 1) / r
	return max(target, mean+BalanceSlack), true
}

// Goal is what a replica of l comes down to, refusing and shedding: its
// Target, or the mean and BalanceSlack while another replica holds under
// 90% of the mean.
func (l Load) Goal() (goal int, ok bool) {
	target, ok := l.Target()
	if !ok {
		return 0, false
	}
	mean := (l.Streams + l.Replicas - 1) / l.Replicas
	if l.Least*10 < mean*9 {
		return mean + BalanceSlack, true
	}
	return target, true
}

// Over reports whether a replica holding local streams (the new one among
// them) is over its goal, and why, for the refusal's message.
func (l Load) Over(local int) (bool, string) {
	goal, ok := l.Goal()
	if !ok || local <= goal {
		return false, ""
	}
	return true, fmt.Sprintf("replica over its share of the fleet: %d streams, target %d (%d streams on %d replicas); connect to another", local-1, goal, l.Streams, l.Replicas)
}

// Excess is how many of local streams to shed now: what is over the
// goal, at most budget (the shed rate's tokens).
func (l Load) Excess(local, budget int) int {
	goal, ok := l.Goal()
	if !ok || local <= goal || budget <= 0 {
		return 0
	}
	return min(local-goal, budget)
}

// PickShed chooses n of the candidates to shed, at random so that replicas
// shedding at once do not move the same clients: the delta ones first, as
// their clients resume with initial_resource_versions and are resent
// nothing, then the others. It returns their indexes.
func PickShed(delta []bool, n int, r *rand.Rand) []int {
	var d, other []int
	for i, isDelta := range delta {
		if isDelta {
			d = append(d, i)
		} else {
			other = append(other, i)
		}
	}
	r.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
	r.Shuffle(len(other), func(i, j int) { other[i], other[j] = other[j], other[i] })
	out := append(d, other...)
	return out[:min(n, len(out))]
}
