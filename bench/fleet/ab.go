package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The A/B scenario (-ab) measures the server CPU of an EDS change on two
// servers in one run, interleaved: both fleets stay connected, and the
// changes alternate between the servers, A B B A A B ..., each measured
// alone while the other fleet is idle. Run one server after the other,
// as the fleet scenario does, and the machine's drift over the minutes
// between them (±10% here) swamps a difference of a few percent, such as
// what status tracking adds (pylon-unobserved,pylon); interleaved, the
// drift falls on both alike.

// abHeader heads the A/B table.
const abHeader = "| fleet | changes each | A: server CPU summed (of it GC) | B: server CPU summed (of it GC) | B / A | B / A, first half / second half | B / A without GC | B / A, medians |\n| --- | --- | --- | --- | --- | --- | --- | --- |"

// measureAB prints a row of the A/B table per proxy and cluster count.
func measureAB(ns, cs, impls string, delta bool, perConn, count int, profile string) {
	fmt.Println(abHeader)
	for _, c := range ints(cs) {
		for _, n := range ints(ns) {
			row, err := runAB(strings.Split(impls, ","), n, c, delta, perConn, count, profile)
			if err != nil {
				fmt.Fprintf(os.Stderr, "-ab n=%d clusters=%d: %v\n", n, c, err)
				continue
			}
			fmt.Println(row)
		}
	}
}

// abSide is one server of the A/B scenario and its fleet.
type abSide struct {
	c       *child
	f       *fleet
	version int       // the EDS version set last
	cpu     []float64 // per change, seconds
	gc      float64   // the collector's share of cpu, summed (gcCPU)
}

// runAB connects a fleet to each of the two servers and measures count
// EDS changes on each, alternating. With profile, both servers' CPU
// profiles span the same changes but the first pair (DIR/ab-a-NAME-N-C.cpu
// and ab-b-...).
func runAB(impls []string, n, clusters int, delta bool, perConn, count int, profile string) (string, error) {
	sides := make([]*abSide, 2)
	for i, impl := range impls {
		c, err := startChild(impl, clusters)
		if err != nil {
			return "", err
		}
		defer c.stop()
		f := newFleet(n, clusters, speaksDelta(impl, delta, false), perConn)
		if err := f.dial(c.xds); err != nil {
			return "", err
		}
		defer f.close()
		var r result
		if err := firstConfig(c, f, &r, impl, false); err != nil {
			return "", fmt.Errorf("%s: %w", impl, err)
		}
		sides[i] = &abSide{c: c, f: f}
	}
	var profiled sync.WaitGroup
	// On every return: a profile still being taken when a change fails
	// would print its error into the next row.
	defer profiled.Wait()
	start := time.Now()
	for k := range 2 * count {
		if k == 2 && profile != "" {
			// Long enough for every pair but the first, as long as it
			// took (a server is idle while the other's change runs).
			secs := strconv.Itoa(max(1, int(time.Since(start).Seconds()*float64(count-1))))
			for i, s := range sides {
				file := fmt.Sprintf("%s/ab-%c-%s-%d-%d.cpu", profile, 'a'+i, abName(impls[i]), n, clusters)
				profiled.Go(func() { fetch(s.c, "/debug/pprof/profile?seconds="+secs, file) })
			}
		}
		s := sides[abTurn(k)]
		if err := s.change(); err != nil {
			return "", err
		}
	}
	profiled.Wait()
	a, b := sides[0].cpu, sides[1].cpu
	half := count / 2
	mode := "SotW"
	if delta {
		mode = "delta"
	}
	ga, gb := sides[0].gc, sides[1].gc
	return fmt.Sprintf("| %s, %s: %d %s proxies, %d clusters | %d | %.3f s (%.3f s) | %.3f s (%.3f s) | %.3f | %.3f / %.3f | %.3f | %.3f |",
		impls[0], impls[1], n, mode, clusters, count, sum(a), ga, sum(b), gb, sum(b)/sum(a),
		sum(b[:half])/sum(a[:half]), sum(b[half:])/sum(a[half:]), (sum(b)-gb)/(sum(a)-ga), median(b)/median(a)), nil
}

// abName is impl as a file name's part: NAME of NAME@PATH (the side's
// letter tells two builds of one server apart).
func abName(impl string) string {
	name, _, _ := strings.Cut(impl, "@")
	return name
}

// abTurn is which side makes the k-th change: A B, B A, A B ..., so that
// each goes first as often as second (the second of a pair finds the
// machine as the first left it).
func abTurn(k int) int { return (k + k/2) % 2 }

// change makes one EDS change on s's server and records its CPU, the
// ACKs' included.
func (s *abSide) change() error {
	f := s.f
	s.version++
	f.edsSeen.Store(0)
	f.started = time.Now()
	f.epoch.Add(1)
	gc0, gcErr := s.c.gcCPU()
	cpu0 := threadsCPU(s.c.cmd.Process.Pid)
	if err := s.c.set(s.version, 0); err != nil {
		return err
	}
	if _, err := waitFor(&f.edsSeen, int64(f.n), 5*time.Minute); err != nil {
		return fmt.Errorf("EDS change %d: %w", s.version, err)
	}
	time.Sleep(200 * time.Millisecond) // ACKs in
	s.cpu = append(s.cpu, threadsCPU(s.c.cmd.Process.Pid)-cpu0)
	gc, err := s.c.gcCPU()
	if err != nil || gcErr != nil {
		// An older build of the benchmark (NAME@PATH) does not say:
		// the columns without GC read NaN.
		s.gc = math.NaN()
	}
	s.gc += gc - gc0
	return nil
}

// gcCPU is the server's garbage collection CPU so far, seconds, as its
// runtime reckons it.
func (c *child) gcCPU() (float64, error) {
	resp, err := http.Get("http://" + c.ctl + "/gccpu")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return strconv.ParseFloat(string(b), 64)
}

// threadsCPU is the CPU seconds pid's threads have run, to the
// nanosecond (schedstat), where /proc/PID/stat counts ticks of 10 ms: an
// EDS change takes a few dozen. A thread that ended is not counted; Go
// ends few.
func threadsCPU(pid int) float64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			ns += v
		}
	}
	return float64(ns) / 1e9
}

// median is v's median; it sorts a copy.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// checkAB says what is wrong with the flags of the A/B scenario, "" if
// nothing.
func checkAB(impls string, eds int, scenario bool) string {
	switch {
	case scenario:
		return "-ab: not with -churn or -failover"
	case len(strings.Split(impls, ",")) != 2:
		return "-ab: -impl names two servers"
	case eds < 2:
		return "-ab: -eds at least 2 (the table compares the halves)"
	case strings.Contains(impls, "pylon-api") || strings.Contains(impls, "pylon-file"):
		return "-ab: not pylon-api or pylon-file (changes through the daemon's API or file are measured in the fleet scenario)"
	}
	return ""
}

// speaksDelta says whether the fleet facing impl speaks delta xDS: when
// the driver was asked for -delta, to every server, go-control-plane too
// (its snapshot cache serves delta watches), so that each variant is
// compared with the same variant; but in the failover scenario only to
// Pylon, since its SYNCED watch reads go-control-plane's SotW callbacks
// only (gcpFeed).
func speaksDelta(impl string, delta, failover bool) bool {
	return delta && (!failover || strings.HasPrefix(impl, "pylon"))
}
