package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// fleet is the simulated proxies of a run.
type fleet struct {
	proxies []*proxy
	links   []*link
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// proxySpec is one proxy to start: its node, protocol, how many clusters
// its group has, and the balancer in front of its replicas.
type proxySpec struct {
	id, cluster string
	delta       bool
	want        int
	rr          *roundRobin
}

// startFleet starts the proxies, perConn of them on each connection (all
// of a connection's proxies share its balancer), ramp a second, so that
// the replicas see an arrival, not one burst.
func startFleet(ctx context.Context, specs []proxySpec, perConn, ramp int) *fleet {
	ctx, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel}
	var l *link
	for i, s := range specs {
		if i%perConn == 0 || l.rr != s.rr {
			l = &link{rr: s.rr}
			f.links = append(f.links, l)
		}
		p := newProxy(s.id, s.cluster, s.delta, s.want, l)
		f.proxies = append(f.proxies, p)
	}
	for i, p := range f.proxies {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i) * time.Second / time.Duration(ramp)):
			}
			p.run(ctx)
		}()
	}
	return f
}

// stop ends every stream and connection and waits for the proxies.
func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
	for _, l := range f.links {
		l.close()
	}
}

// view is the fleet's state at one moment, as its proxies see it.
type view struct {
	ready, open int
	onAddr      map[string]int // open streams per replica address
}

func (f *fleet) view() view {
	v := view{onAddr: map[string]int{}}
	for _, p := range f.proxies {
		p.mu.Lock()
		if p.readyLocked() {
			v.ready++
		}
		if p.open {
			v.open++
			v.onAddr[p.addr]++
		}
		p.mu.Unlock()
	}
	return v
}

// waitReady waits, within bound, until every proxy holds its whole config.
func (f *fleet) waitReady(ctx context.Context, bound time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < bound && ctx.Err() == nil {
		if v := f.view(); v.ready == len(f.proxies) && v.open == len(f.proxies) {
			return time.Since(start), true
		}
		time.Sleep(100 * time.Millisecond) // the proxies' own state, polled
	}
	return time.Since(start), false
}

// tally is what the fleet's proxies went through, summed.
type tally struct {
	lost            int // times a proxy went from its whole config to less
	resumes, resent [2]int
	streams, bytes  int
	ended           map[string]int
	idents          map[string]int
	neverReady      int
}

// tally sums the proxies' counters; [0] is SotW, [1] delta.
func (f *fleet) tally() tally {
	t := tally{ended: map[string]int{}, idents: map[string]int{}}
	for _, p := range f.proxies {
		p.mu.Lock()
		k := 0
		if p.delta {
			k = 1
		}
		t.lost += p.lost
		t.resumes[k] += p.resumes
		t.resent[k] += p.resent
		t.streams += p.streams
		t.bytes += p.bytes
		for r, n := range p.ended {
			t.ended[r] += n
		}
		t.idents[p.ident]++
		if p.readyAt.IsZero() {
			t.neverReady++
		}
		p.mu.Unlock()
	}
	return t
}

// notReady describes up to three proxies without their whole config, for
// a failure's message.
func (f *fleet) notReady() string {
	var out []string
	for _, p := range f.proxies {
		p.mu.Lock()
		if !p.readyLocked() && len(out) < 3 {
			out = append(out, fmt.Sprintf("%s (delta %v) on %q open %v: %d of %d clusters, %d assignments, %d streams, ended %v",
				p.id, p.delta, p.addr, p.open, len(p.clusters), p.want, len(p.eds), p.streams, p.ended))
		}
		p.mu.Unlock()
	}
	return strings.Join(out, "; ")
}
