package main

import (
	"strings"
	"sync/atomic"
	"time"
)

// churnTracker follows every change of the churn schedule to every proxy
// subscribed to its service: a proxy holds registration r once its
// assignment of r's service lists r's endpoint or a later registration,
// and the deregistration of r once the oldest registered endpoint it
// lists is later than r. A change has converged when every subscribed
// proxy holds it; its latency is from when it was issued. The rule leans
// on a service's changes being applied in schedule order: they are 2 x
// clusters changes apart (2 s at 1,000 services and 1,000 changes/s), so
// only an API call still in flight that long after it was issued could
// be credited early.
type churnTracker struct {
	clusters, subs int
	// start is when the tracker was made, before any proxy opened: the
	// times below count from it (set once, read by every proxy).
	start       time.Time
	subscribers []int32 // per service: proxies subscribed to it
	// Per change.
	change  []churnChange
	issued  []atomic.Int64 // ns since start; 0: not issued
	holders []atomic.Int32
	latency []atomic.Int64 // ns; 0: not converged
	// Per registration number: the change that registers it, and the
	// one that deregisters it (-1: none in the schedule).
	regChange, deregChange []int32
	issuedN, converged     atomic.Int64
	edsResponses           atomic.Int64
}

func newChurnTracker(n, clusters, subs, total int) *churnTracker {
	t := &churnTracker{
		start: time.Now(), clusters: clusters, subs: min(subs, clusters), subscribers: make([]int32, clusters),
		change: make([]churnChange, total), issued: make([]atomic.Int64, total),
		holders: make([]atomic.Int32, total), latency: make([]atomic.Int64, total),
	}
	regs := 0
	for k := range total {
		t.change[k] = churnAt(k, clusters)
		regs = max(regs, t.change[k].seq+1)
	}
	t.regChange, t.deregChange = make([]int32, regs), make([]int32, regs)
	for i := range t.deregChange {
		t.deregChange[i] = -1
	}
	for k, c := range t.change {
		if c.dereg {
			t.deregChange[c.seq] = int32(k)
		} else {
			t.regChange[c.seq] = int32(k)
		}
	}
	for p := range n {
		for _, c := range t.subsOf(p) {
			t.subscribers[c]++
		}
	}
	return t
}

// subsOf is the services proxy p subscribes to over EDS: subs of them,
// spread evenly, so that every service has about n*subs/clusters
// subscribers.
func (t *churnTracker) subsOf(p int) []int {
	out := make([]int, t.subs)
	for j := range out {
		out[j] = (p + j*t.clusters/t.subs) % t.clusters
	}
	return out
}

// issue marks change k issued now.
func (t *churnTracker) issue(k int, at time.Time) {
	t.issued[k].Store(max(1, int64(at.Sub(t.start))))
	t.issuedN.Add(1)
}

// held is what a proxy holds of one service: the latest registration it
// has seen (-1: none) and the oldest registered endpoint it lists (or
// hi+1 when it lists none: everything up to hi was deregistered).
type held struct{ hi, gone int }

// saw takes an assignment a proxy received, encoded: its cluster name and
// its endpoints' addresses, read off the wire (readAssignment).
func (t *churnTracker) saw(p *proxy, cla []byte) {
	hi, lo := -1, -1
	name, err := readAssignment(cla, func(addr []byte) {
		s := addrSeqBytes(addr)
		if s < 0 {
			return
		}
		hi = max(hi, s)
		if lo < 0 || s < lo {
			lo = s
		}
	})
	if err != nil {
		return
	}
	c := clusterIndex(name)
	if c < 0 || c >= t.clusters {
		return
	}
	if p.churn == nil {
		p.churn = map[int]held{}
	}
	prev, ok := p.churn[c]
	if !ok {
		prev = held{hi: -1}
	}
	next := held{hi: max(prev.hi, hi), gone: lo}
	if lo < 0 {
		next.gone = next.hi + 1
	}
	next.gone = max(next.gone, prev.gone)
	p.churn[c] = next
	now := int64(time.Since(t.start))
	first := prev.hi + 1 + ((c-(prev.hi+1))%t.clusters+t.clusters)%t.clusters
	for s := first; s <= next.hi && s < len(t.regChange); s += t.clusters {
		t.hold(int(t.regChange[s]), now)
	}
	first = prev.gone + ((c-prev.gone)%t.clusters+t.clusters)%t.clusters
	for s := first; s < next.gone && s < len(t.deregChange); s += t.clusters {
		if k := t.deregChange[s]; k >= 0 {
			t.hold(int(k), now)
		}
	}
}

func (t *churnTracker) hold(k int, now int64) {
	at := t.issued[k].Load()
	if at == 0 {
		return
	}
	if t.holders[k].Add(1) == t.subscribers[t.change[k].cluster] {
		t.latency[k].Store(max(1, now-at))
		t.converged.Add(1)
	}
}

// clusterIndex reads i from "service-%04d", or from a Kubernetes
// source's "bench/service-%04d".
func clusterIndex(name string) int {
	const prefix = "service-"
	name = strings.TrimPrefix(name, kubeNS+"/")
	if len(name) <= len(prefix) || name[:len(prefix)] != prefix {
		return -1
	}
	i := 0
	for _, r := range name[len(prefix):] {
		if r < '0' || r > '9' {
			return -1
		}
		i = i*10 + int(r-'0')
	}
	return i
}

// pending counts the issued changes with subscribers that have not
// converged.
func (t *churnTracker) pending() int {
	n := 0
	for k := range t.change {
		if t.issued[k].Load() != 0 && t.latency[k].Load() == 0 && t.subscribers[t.change[k].cluster] > 0 {
			n++
		}
	}
	return n
}

// latencies are the converged changes' latencies.
func (t *churnTracker) latencies() []time.Duration {
	var out []time.Duration
	for k := range t.change {
		if l := t.latency[k].Load(); l > 0 {
			out = append(out, time.Duration(l))
		}
	}
	return out
}
