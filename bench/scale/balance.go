package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// servicesDoc is a config of n services of one endpoint each, names
// prefixed.
func servicesDoc(prefix string, n, endpoints int) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&b, "- name: %s%03d\n  endpoints:\n", prefix, i)
		for j := range endpoints {
			fmt.Fprintf(&b, "  - { address: 10.%d.%d.%d, port: 8080 }\n", i>>8&255, i&255, j&255)
		}
	}
	return b.String()
}

// balanceResult is what the balance scenario measured.
type balanceResult struct {
	counts   []int         // each replica's streams at the end (its metrics)
	reached  time.Duration // when every replica first held its share (-1: never)
	notReady int           // most proxies without their whole config at a sample
	t        tally
}

// runBalance is issue 33's balance must-show: replicas A and B on etcd,
// c.proxies proxies (half delta) on them behind a round-robin balancer;
// C started and added to the balancer; every second each replica's
// streams (pylon_xds_streams on its /metrics) and the proxies' state.
func runBalance(ctx context.Context, c config, w io.Writer) (bool, error) {
	e, err := newEnv(ctx, c.pylon, c.flags)
	if err != nil {
		return false, err
	}
	defer e.close()
	ab, err := e.startAll(ctx, []string{"replica-a", "replica-b"}, make([][]string, 2))
	if err != nil {
		return false, err
	}
	a, b := ab[0], ab[1]
	version, err := a.apply(ctx, servicesDoc("svc-", c.services, c.endpoints))
	if err != nil {
		return false, err
	}
	if err := waitPublished(ctx, []*replica{a, b}, version, 0, startBound); err != nil {
		return false, err
	}
	rr := newRoundRobin(a.xdsAddr, b.xdsAddr)
	specs := make([]proxySpec, c.proxies)
	for i := range specs {
		specs[i] = proxySpec{id: fmt.Sprintf("proxy-%05d", i), cluster: "scale", delta: i%2 == 0, want: c.services, rr: rr}
	}
	cpu0 := cpuOf([]*replica{a, b})
	f := startFleet(ctx, specs, c.perConn, c.ramp)
	defer f.stop()
	took, ok := f.waitReady(ctx, c.connectBound)
	cpu := cpuOf([]*replica{a, b}) - cpu0
	fmt.Fprintf(w, "%d proxies (%d delta, %d SotW, %d a connection, arriving %d a second) on %s and %s: all configured in %v: %v\n",
		c.proxies, (c.proxies+1)/2, c.proxies/2, c.perConn, c.ramp, a.id, b.id, took.Round(time.Millisecond), ok)
	if !ok {
		return false, fmt.Errorf("%d of %d proxies configured within %v: %s", f.view().ready, c.proxies, c.connectBound, f.notReady())
	}
	before := f.tally()
	fmt.Fprintf(w, "connecting: %d B received per proxy, replicas' CPU %.2f s (%.0f µs per proxy)\n",
		before.bytes/c.proxies, cpu, cpu/float64(c.proxies)*1e6)
	if err := printCounts(ctx, w, "before replica-c", []*replica{a, b}); err != nil {
		return false, err
	}

	cr, err := e.start(ctx, "replica-c")
	if err != nil {
		return false, err
	}
	if err := waitPublished(ctx, []*replica{cr}, version, 0, startBound); err != nil {
		return false, err
	}
	rr.set(a.xdsAddr, b.xdsAddr, cr.xdsAddr)
	all := []*replica{a, b, cr}
	cpu0 = cpuOf(all)
	res := watchBalance(ctx, c, w, all, f)
	res.t = f.tally()
	fmt.Fprintf(w, "balancing: %d B received by the proxies in all, replicas' CPU %.2f s\n", res.t.bytes-before.bytes, cpuOf(all)-cpu0)
	if res.t.lost > 0 || res.notReady > 0 {
		fmt.Fprintf(w, "without their whole config now: %s\n", f.notReady())
	}
	return reportBalance(c, w, res, before), nil
}

// watchBalance samples every second for c.within, and on for up to
// c.within more while the replicas have not reached their share.
func watchBalance(ctx context.Context, c config, w io.Writer, rs []*replica, f *fleet) balanceResult {
	res := balanceResult{reached: -1, counts: make([]int, len(rs))}
	lo, hi := share(c.proxies, len(rs))
	fmt.Fprintf(w, "replica-c started and added to the balancer; each replica's share %d-%d (the mean +/- 10%%)\n", lo, hi)
	fmt.Fprintf(w, "%6s | %6s %6s %6s | %6s %6s | %s\n", "t (s)", "A", "B", "C", "open", "ready", "sheds (delta/sotw), refusals, summed")
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		<-tick.C
		el := time.Since(start)
		var sheds [2]float64
		var refused float64
		in := true
		for i, r := range rs {
			m, err := r.metrics(ctx)
			if err != nil {
				res.counts[i] = -1
				in = false
				continue
			}
			res.counts[i] = int(m["pylon_xds_streams"])
			sheds[0] += m[`pylon_balance_shed_total{kind="delta"}`]
			sheds[1] += m[`pylon_balance_shed_total{kind="sotw"}`]
			refused += m["pylon_balance_refused_total"]
			in = in && res.counts[i] >= lo && res.counts[i] <= hi
		}
		v := f.view()
		res.notReady = max(res.notReady, len(f.proxies)-v.ready)
		fmt.Fprintf(w, "%6.0f | %6d %6d %6d | %6d %6d | %.0f/%.0f, %.0f\n", el.Seconds(), res.counts[0], res.counts[1], res.counts[2], v.open, v.ready, sheds[0], sheds[1], refused)
		if in && res.reached < 0 {
			res.reached = el
		}
		if el >= c.within && (res.reached >= 0 || el >= 2*c.within) {
			break
		}
	}
	return res
}

// share is the range a replica's count must fall in: the mean +/- 10%.
func share(n, replicas int) (lo, hi int) {
	mean := float64(n) / float64(replicas)
	return int(math.Ceil(mean * 0.9)), int(math.Floor(mean * 1.1))
}

// reportBalance prints the pass criteria, each checked.
func reportBalance(c config, w io.Writer, r balanceResult, before tally) bool {
	resumes := [2]int{r.t.resumes[0] - before.resumes[0], r.t.resumes[1] - before.resumes[1]}
	resent := [2]int{r.t.resent[0] - before.resent[0], r.t.resent[1] - before.resent[1]}
	fmt.Fprintf(w, "streams ended since the fleet connected: %v\n", r.t.ended)
	fmt.Fprintf(w, "resumes after the scale-up: delta %d (resources resent %d), SotW %d (resources resent %d)\n", resumes[1], resent[1], resumes[0], resent[0])
	checks := []struct {
		ok   bool
		what string
	}{
		{r.reached >= 0 && r.reached <= c.within, fmt.Sprintf("every replica within its share within %v: reached at %v, end counts %v", c.within, r.reached, r.counts)},
		{r.notReady == 0 && r.t.lost == 0, fmt.Sprintf("no proxy without config: at most %d at a sample, %d losses seen by the proxies", r.notReady, r.t.lost)},
		{resent[1] == 0 && resumes[1] > 0, fmt.Sprintf("delta proxies resent nothing on resume: %d resources over %d resumes", resent[1], resumes[1])},
	}
	ok := true
	for _, ch := range checks {
		word := "PASS"
		if !ch.ok {
			word, ok = "FAIL", false
		}
		fmt.Fprintf(w, "%s %s\n", word, ch.what)
	}
	return ok
}

// printCounts prints each replica's streams and the balancing it did so
// far (its metrics).
func printCounts(ctx context.Context, w io.Writer, when string, rs []*replica) error {
	var parts []string
	for _, r := range rs {
		m, err := r.metrics(ctx)
		if err != nil {
			return err
		}
		parts = append(parts, fmt.Sprintf("%s %.0f streams (shed %.0f delta, %.0f SotW; refused %.0f)", r.id, m["pylon_xds_streams"],
			m[`pylon_balance_shed_total{kind="delta"}`], m[`pylon_balance_shed_total{kind="sotw"}`], m["pylon_balance_refused_total"]))
	}
	fmt.Fprintf(w, "%s: %s\n", when, strings.Join(parts, "; "))
	return nil
}
