package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// etcd's embedded server leaves its HTTP keep-alive loops to the
		// process, as the replica suites see it (etcdtest.LeakOptions).
		if err := goleak.Find(etcdtest.LeakOptions()...); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// smoke is the bound of each scenario at the smoke test's size (the
// build of pylon, on a warm cache, included).
const smoke = 3 * time.Minute

// The balance scenario at a small size: it runs end to end, prints its
// timeline and its three criteria, and the two that hold at any size
// pass: no proxy without config, delta proxies resent nothing.
func TestBalanceScenarioRunsAtASmallSize(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and three pylon processes (-short)")
	}
	t.Parallel()
	out := runScenario(t, config{scenario: "balance", proxies: 60, within: 5 * time.Second})
	for _, want := range []string{"t (s) |", "PASS no proxy without config", "PASS delta proxies resent nothing on resume", "every replica within its share within 5s"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// The shard scenario at a small size passes its criteria: each shard
// refuses the other's proxy naming it, pylon status on each replica lists
// all, no proxy loses its config; the memory table is printed and checked,
// but its verdict is not asserted here: at 20 groups what one collection
// leaves is as large as a shard's share (the full run, 200 groups,
// measures it).
func TestShardScenarioPassesAtASmallSize(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and seven pylon processes (-short)")
	}
	t.Parallel()
	c := config{scenario: "shard", proxies: 40, groups: 20, services: 40}
	out := runScenario(t, c)
	for _, want := range []string{"| none-1 | 0 |", "each shard's heap holds its groups only", "PASS a-000-probe on b-1 refused naming shard a",
		"PASS b-000-probe on a-1 refused naming shard b", "PASS pylon status on each of the 6 replicas lists every shard's proxies (20, 20 and 40 rows)",
		"PASS no proxy lost its config"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func runScenario(t *testing.T, c config) string {
	t.Helper()
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	// Summaries published every half second: the counts and pylon
	// status catch up sooner than at the default 5 s.
	c.connectBound, c.flags = time.Minute, []string{"--fleet-status-period", "500ms"}
	ctx, cancel := context.WithTimeout(context.Background(), smoke)
	defer cancel()
	var out bytes.Buffer
	_, err := run(ctx, c, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestShareIsTheMeanPlusOrMinusTenPercent(t *testing.T) {
	for _, c := range []struct{ n, r, lo, hi int }{{3000, 3, 900, 1100}, {60, 3, 18, 22}, {10, 3, 3, 3}} {
		if lo, hi := share(c.n, c.r); lo != c.lo || hi != c.hi {
			t.Errorf("share(%d, %d) = %d, %d; want %d, %d", c.n, c.r, lo, hi, c.lo, c.hi)
		}
	}
}

func TestStatusCountsRowsByShard(t *testing.T) {
	out := `NAME              GROUP   CDS      EDS      LDS   RDS   REPLICA   VERSION
a-000-p00000      a-000   SYNCED   SYNCED   -     -     a-1 [a-*]   v1
a-001-p00002      a-001   SYNCED   SYNCED   -     -     a-2 [a-*]   v1
b-000-p00001      b-000   SYNCED   SYNCED   -     -     b-2 [b-*]   v1
a-000-p00000-all  a-000   SYNCED   SYNCED   -     -     all-1   v1
`
	if got := statusCounts(out); got != [3]int{2, 1, 1} {
		t.Errorf("statusCounts = %v, want [2 1 1]", got)
	}
}

func TestDiffIsWhatWasAddedAndWhatWent(t *testing.T) {
	added, gone := diff([]string{"a", "b", "c"}, []string{"b", "c", "d"})
	if !slices.Equal(added, []string{"d"}) || !slices.Equal(gone, []string{"a"}) {
		t.Errorf("diff = %v, %v; want [d], [a]", added, gone)
	}
}
