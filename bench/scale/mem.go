package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// memTable is each replica's heap (live, after a forced collection) and
// RSS at each phase of the shard scenario.
type memTable struct {
	ids    []string
	rs     []*replica
	phases []string
	heap   map[string][]float64 // phase -> per replica
	rss    map[string][]float64
}

func newMemTable(rs []*replica) *memTable {
	m := &memTable{rs: rs, heap: map[string][]float64{}, rss: map[string][]float64{}}
	for _, r := range rs {
		m.ids = append(m.ids, r.id)
	}
	return m
}

// samples and sampleGap: each phase's figure is the least of a few
// samples after a forced collection, a couple of seconds apart, since one
// sample may still hold what the last compile or publish let go of.
const (
	samples   = 3
	sampleGap = 2 * time.Second
)

func (m *memTable) sample(ctx context.Context, phase string) error {
	m.phases = append(m.phases, phase)
	heap := make([]float64, len(m.rs))
	rss := make([]float64, len(m.rs))
	for k := range samples {
		if k > 0 {
			time.Sleep(sampleGap)
		}
		for i, r := range m.rs {
			h, s, err := r.memory(ctx)
			if err != nil {
				return err
			}
			if k == 0 || h < heap[i] {
				heap[i] = h
			}
			if k == 0 || s < rss[i] {
				rss[i] = s
			}
		}
	}
	m.heap[phase], m.rss[phase] = heap, rss
	return nil
}

func mib(b float64) string { return fmt.Sprintf("%.1f", b/(1<<20)) }

// print writes the table: a row per replica, heap and RSS per phase in
// MiB, and the streams each holds.
func (m *memTable) print(w io.Writer, rs []*replica, f *fleet) {
	v := f.view()
	head := []string{"replica", "streams"}
	for _, p := range m.phases {
		head = append(head, "heap "+p, "RSS "+p)
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
	for i, r := range rs {
		row := []string{r.id, fmt.Sprint(v.onAddr[r.xdsAddr])}
		for _, p := range m.phases {
			row = append(row, mib(m.heap[p][i]), mib(m.rss[p][i]))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(w, "(MiB, the least of %d samples %v apart; heap: go_memstats_heap_alloc_bytes after /debug/pprof/heap?gc=1; RSS: VmRSS of /proc/PID/status)\n", samples, sampleGap)
}

// check: what each shard builds (its replicas' heap configured, less that
// of none-1, which decodes the same config and builds nothing; none of
// them took the writes), the mean of its two replicas, is at most 60% of
// what the replica of every group builds: half the groups, and room for
// what a collection leaves.
func (m *memTable) check(s *shardEnv, groups int) check {
	n := len(m.rs)
	base := m.heap["configured"][n-1]
	built := func(i int) float64 { return m.heap["configured"][i] - base }
	all := built(n - 2)
	ok := all > 0
	var shares []string
	for sh := range 2 {
		mean := (built(2*sh) + built(2*sh+1)) / 2
		ok = ok && mean <= 0.6*all
		shares = append(shares, fmt.Sprintf("shard %s %s MiB (%.0f%%)", shardNames[sh], mib(mean), 100*mean/max(all, 1)))
	}
	return check{ok, fmt.Sprintf("each shard's heap holds its groups only: past the decoded config (none-1's heap, %s MiB), the replica of all %d groups builds %s MiB, %s",
		mib(base), groups, mib(all), strings.Join(shares, ", "))}
}
