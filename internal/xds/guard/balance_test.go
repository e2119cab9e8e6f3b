package guard

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBalanceTargetIsTheMeanPlusTenPercentWithAFloor(t *testing.T) {
	for _, c := range []struct {
		name string
		load Load
		want int
		ok   bool
	}{
		{"3000 on 3: 1100", Load{Replicas: 3, Streams: 3000, Fresh: true}, 1100, true},
		{"3001 on 3: rounded up", Load{Replicas: 3, Streams: 3001, Fresh: true}, 1101, true},
		{"200 on 2: 110", Load{Replicas: 2, Streams: 200, Fresh: true}, 110, true},
		{"24 on 2: the floor (12+2) over 10% (13.2)", Load{Replicas: 2, Streams: 24, Fresh: true}, 14, true},
		{"3 on 2: the floor", Load{Replicas: 2, Streams: 3, Fresh: true}, 4, true},
		{"stale: nothing to balance", Load{Replicas: 3, Streams: 3000}, 0, false},
		{"alone: nothing to balance", Load{Replicas: 1, Streams: 3000, Fresh: true}, 0, false},
		{"no streams", Load{Replicas: 2, Fresh: true}, 0, false},
	} {
		got, ok := c.load.Target()
		if got != c.want || ok != c.ok {
			t.Errorf("%s: Target() = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestBalanceRefusesOnlyOverTheTargetOfAFreshCount(t *testing.T) {
	l := Load{Replicas: 2, Streams: 200, Least: 90, Fresh: true} // target 110
	if over, _ := l.Over(110); over {
		t.Error("the 110th stream of a target of 110 was refused")
	}
	over, why := l.Over(111)
	if !over {
		t.Fatal("the 111th stream of a target of 110 was taken")
	}
	for _, want := range []string{"over its share", "110 streams, target 110", "200 streams on 2 replicas", "connect to another"} {
		if !strings.Contains(why, want) {
			t.Errorf("the refusal %q does not say %q", why, want)
		}
	}
	l.Fresh = false
	if over, _ := l.Over(1000); over {
		t.Error("a stale count refused a stream")
	}
}

func TestBalanceShedsTheExcessWithinTheBudget(t *testing.T) {
	l := Load{Replicas: 2, Streams: 200, Least: 95, Fresh: true} // target 110
	for _, c := range []struct{ local, budget, want int }{
		{200, 10, 10}, {115, 10, 5}, {110, 10, 0}, {50, 10, 0}, {200, 0, 0},
	} {
		if got := l.Excess(c.local, c.budget); got != c.want {
			t.Errorf("Excess(%d, %d) = %d, want %d", c.local, c.budget, got, c.want)
		}
	}
	l.Fresh = false
	if got := l.Excess(200, 10); got != 0 {
		t.Errorf("a stale count sheds %d streams, want none", got)
	}
}

func TestBalanceShedsDeltaStreamsFirstAtRandom(t *testing.T) {
	delta := []bool{false, true, false, true, true, false}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	for range 50 {
		got := PickShed(delta, 4, r)
		if len(got) != 4 {
			t.Fatalf("PickShed(…, 4) chose %d", len(got))
		}
		for i, idx := range got[:3] {
			if !delta[idx] {
				t.Fatalf("choice %d is a state-of-the-world stream while delta ones were left: %v", i, got)
			}
		}
		if delta[got[3]] {
			t.Fatalf("the fourth choice is delta: there are three: %v", got)
		}
		seen[got[0]] = true
	}
	if len(seen) != 3 {
		t.Errorf("the first choice was always among %v: not at random", seen)
	}
	if got := PickShed(delta, 10, r); len(got) != len(delta) {
		t.Errorf("PickShed of more than there are chose %d, want all %d", len(got), len(delta))
	}
}

// While another replica holds under 90% of the mean (a replica just
// started), the others come down to the mean (and the slack), not only
// to their target: at 3,000 on three, a target of 1,100 each left the new
// replica 800.
func TestBalanceComesDownToTheMeanWhileAReplicaIsUnderIt(t *testing.T) {
	for _, c := range []struct {
		name        string
		least, goal int
	}{
		{"the third at 800: the mean", 800, 1002},
		{"the third at 899: the mean", 899, 1002},
		{"the third at 900: the target", 900, 1100},
		{"even: the target", 1000, 1100},
	} {
		l := Load{Replicas: 3, Streams: 3000, Least: c.least, Fresh: true}
		if goal, ok := l.Goal(); goal != c.goal || !ok {
			t.Errorf("%s: Goal() = %d, %v; want %d", c.name, goal, ok, c.goal)
		}
		if got, want := l.Excess(1100, 1000), max(1100-c.goal, 0); got != want {
			t.Errorf("%s: Excess(1100) = %d, want %d", c.name, got, want)
		}
		if over, _ := l.Over(1050); over != (c.goal < 1050) {
			t.Errorf("%s: Over(1050) = %v, want %v", c.name, over, c.goal < 1050)
		}
	}
}
