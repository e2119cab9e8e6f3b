package protocol

import (
	"maps"
	"time"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Ledger is what a stream's client holds of one type, per resource: as last
// sent, and as ACKed. Make-before-break decisions read it: a route waits
// until the clusters it names are ACKed, a cluster leaves only once nothing
// the client holds names it.
type Ledger struct {
	// Held is what the client was sent (or said it had); a nil value, in
	// delta, means it was told the resource does not exist.
	Held  map[string]*snapshot.Resource
	Acked map[string]*snapshot.Resource
	// Nacked holds the versions the client rejected; what names them waits
	// until the config changes.
	Nacked map[string]*snapshot.Resource
	// Moving counts, per name, the responses not yet answered that change
	// it. A resource has arrived only when nothing about it is in flight:
	// a removal on its way followed by a re-add leaves an Envoy with a new,
	// cold cluster, whatever the versions say.
	Moving InFlight
	// Synced is set once the client has ACKed or NACKed a response of
	// the type: before that it is still fetching its initial config, and
	// nothing is held back for it.
	Synced bool
	// HeldAs and AckedAs are the shared canons whose maps Held and Acked
	// are, nil when the map is the stream's own. A shared map is replaced,
	// never written.
	HeldAs, AckedAs *Canon
}

// settled returns the canon the client has ACKed when nothing of the type
// is in flight or rejected: then what has arrived depends on that canon
// alone, the same for every stream in the same state.
func (l *Ledger) settled() *Canon {
	if l.AckedAs == nil || !l.Moving.empty() || len(l.Nacked) > 0 {
		return nil
	}
	return l.AckedAs
}

// bump counts one more response in flight that changes name.
func (l *Ledger) bump(name string) { l.Moving.add(name) }

// InFlight counts, per name, the responses in flight that change it. Most
// changes change one name (a route table, a cluster's endpoints): that
// one is kept inline, so a push to every stream of the fleet does not
// make a map on each (BenchmarkFanOutNamedEndpoints's allocations show
// them). A name is counted in one place only, inline or in more.
type InFlight struct {
	one  string
	n    int // one's count; 0: the inline place is free
	more map[string]int
}

func (f *InFlight) add(name string) {
	switch {
	case f.n > 0 && f.one == name:
		f.n++
	case f.n == 0 && f.more[name] == 0:
		f.one, f.n = name, 1
	default:
		if f.more == nil {
			f.more = map[string]int{}
		}
		f.more[name]++
	}
}

// sub counts one response changing name fewer.
func (f *InFlight) sub(name string) {
	if f.n > 0 && f.one == name {
		if f.n--; f.n == 0 {
			f.one = ""
		}
		return
	}
	if f.more[name] > 1 {
		f.more[name]--
		return
	}
	delete(f.more, name)
	if len(f.more) == 0 {
		f.more = nil // a drained map keeps its buckets
	}
}

func (f *InFlight) count(name string) int {
	if f.n > 0 && f.one == name {
		return f.n
	}
	return f.more[name]
}

func (f *InFlight) empty() bool { return f.n == 0 && len(f.more) == 0 }

// Clone is a copy of f that shares nothing with it.
func (f *InFlight) Clone() InFlight { return InFlight{one: f.one, n: f.n, more: maps.Clone(f.more)} }

// reject records that the client rejected r, named name.
func (l *Ledger) reject(name string, r *snapshot.Resource) {
	if l.Nacked == nil {
		l.Nacked = map[string]*snapshot.Resource{}
	}
	l.Nacked[name] = r
}

// Holdings is one type's state on a stream, as the planner sees it.
type Holdings interface {
	Book() *Ledger
	// covers reports whether the client's subscription includes name.
	Covers(name string) bool
}

func sameVersion(a, b *snapshot.Resource) bool {
	return a != nil && b != nil && a.Version == b.Version
}

// Planner decides, for one pass over a stream's types, what may be sent
// now. It is a pure value of what it was given: the client's holdings of
// each type (view), the time, whether the stream's bounded hold has
// reached its bound, and the server's planning constants (cfg). It never
// touches the stream; what it decided (Flags, RejectedHolds, Decide) the
// stream carries out. Its caches live for one pass.
type Planner struct {
	view HoldView
	cfg  *PlanConfig
	// Now is the pass's time, which what the stream records of it takes.
	Now time.Time
	// refs caches, per type URL, the names that something the client holds
	// (sent or ACKed) refers to.
	refs map[string]map[string]bool
	// rejects are the resources held back because the client rejected
	// what they name, for the stream to log.
	rejects []RejectedHold
	// expired is set when the stream's bounded hold for a slow client has
	// reached its bound: nothing more is held back for a slow client.
	expired bool
	// nacks is whether any of the client's types has a rejected resource,
	// computed once a pass (0 unknown, 1 no, 2 yes).
	nacks int8
	// held is set when the pass kept something back for a slow client,
	// rejected when for a NACK, which only a config change resolves, and
	// waiting when a removal waits for the client to drop what names it.
	held, rejected, waiting bool
}

// PlanConfig is what every pass of a server's streams plans with, fixed
// when the server is made.
type PlanConfig struct {
	ranked []*xdstype.Type // the registry's make-before-break order
	share  *Sharing
	// holdTimeout bounds a hold for a slow client (xds.Options.HoldTimeout).
	holdTimeout time.Duration
}

// HoldView returns a type's state on a stream as the planner sees it, nil
// if the client has not asked for the type there.
type HoldView func(typeURL string) Holdings

// RejectedHold is a resource held back, and the name of what it needs
// that the client rejected.
type RejectedHold struct {
	Resource   *snapshot.Resource
	Dependency string
}

// NewPlanConfig is the planning constants of a server.
func NewPlanConfig(ranked []*xdstype.Type, share *Sharing, holdTimeout time.Duration) PlanConfig {
	return PlanConfig{ranked: ranked, share: share, holdTimeout: holdTimeout}
}

// NewPlanner returns a planner for one pass at now over view, for a stream
// whose bounded hold for a slow client began at holdSince (zero: none). A
// value: a caller that keeps it to itself keeps it on its stack.
func NewPlanner(view HoldView, cfg *PlanConfig, now, holdSince time.Time) Planner {
	return Planner{view: view, cfg: cfg, Now: now, expired: cfg.expired(holdSince, now)}
}

// RejectedHolds returns the resources the pass held back because the client
// rejected what they name, for the stream to log.
func (p *Planner) RejectedHolds() []RejectedHold { return p.rejects }

// expired reports whether a bounded hold that began at since (zero: none)
// has reached its bound at now.
func (c *PlanConfig) expired(since, now time.Time) bool {
	return !since.IsZero() && now.Sub(since) >= c.holdTimeout
}

// mustWait reports whether r has to wait before it is sent: it names a
// resource of a type that must precede it (a cluster), the client
// subscribes to that resource, and the client does not have it yet. A
// client that does not subscribe to it learns of it from r (as gRPC learns
// clusters from routes), so r is never held for it.
func (p *Planner) mustWait(r *snapshot.Resource) bool {
	if p.arrivedShared(r) {
		return false
	}
	wait, rejected := false, false
	for _, ref := range r.Precede {
		h := p.view(ref.TypeURL)
		if h == nil || !h.Covers(ref.Name) || !h.Book().Synced {
			// Never held for a resource the client does not subscribe to,
			// nor while it fetches its first config: on first connect every
			// request is answered at once.
			continue
		}
		ok, nacked := p.arrived(h.Book(), ref.Name)
		wait = wait || !ok
		if nacked && !rejected {
			rejected = true
			p.rejects = append(p.rejects, RejectedHold{r, ref.Name})
		}
		if wait && !rejected && !p.anyNacked() {
			// Nothing can turn this into a rejection: the answer is known
			// (a route naming a thousand clusters need not check them all).
			break
		}
	}
	switch {
	case !wait:
		return false
	case rejected:
		// The client rejected what r needs: r waits for a config change.
		p.rejected = true
		return true
	}
	// A slow client may hold things back only for a while: past the bound,
	// the stream moves on rather than stall.
	if p.expired {
		return false
	}
	p.held = true
	return true
}

// arrivedShared answers mustWait for r from a memo shared by every stream
// in the same state, when it can: everything r must follow is of one type
// the client subscribes to by wildcard (Envoy's CDS), that type's ledger
// and those of what its resources name are settled canons, and the memo
// says all of r's dependencies arrived. Otherwise (false) the full check
// decides. At ten thousand proxies reconnecting, a route naming a
// thousand clusters is checked once instead of once per proxy.
func (p *Planner) arrivedShared(r *snapshot.Resource) bool {
	if len(r.Precede) == 0 {
		return true
	}
	url := r.PrecedeType()
	if url == "" {
		return false
	}
	h := p.view(url)
	if h == nil {
		return false
	}
	l := h.Book()
	c := l.settled()
	if c == nil || !c.sub.Wildcard || !l.Synced {
		return false
	}
	key := arrivalKey{r: r}
	if len(c.types) > len(key.deps) {
		return false
	}
	for i, t := range c.types {
		if dh := p.view(t); dh != nil {
			if key.deps[i] = dh.Book().settled(); key.deps[i] == nil {
				return false
			}
		}
	}
	return c.arrived(key)
}

// anyNacked reports whether the client rejected anything it was sent, of
// any type.
func (p *Planner) anyNacked() bool {
	if p.nacks == 0 {
		p.nacks = 1
		for _, t := range p.cfg.ranked {
			if h := p.view(t.URL); h != nil && len(h.Book().Nacked) > 0 {
				p.nacks = 2
				break
			}
		}
	}
	return p.nacks == 2
}

// arrived reports whether the client has ACKed the named resource and what
// that resource waits for in turn (a cluster's assignment), and whether a
// rejected version is what is missing.
func (p *Planner) arrived(l *Ledger, name string) (ok, nacked bool) {
	a := l.Acked[name]
	if a == nil || l.Moving.count(name) > 0 {
		return false, l.Nacked[name] != nil
	}
	for _, ref := range a.Refs {
		h := p.view(ref.TypeURL)
		if h == nil {
			continue
		}
		if dl := h.Book(); dl.Acked[ref.Name] == nil || dl.Moving.count(ref.Name) > 0 {
			return false, dl.Nacked[ref.Name] != nil
		}
	}
	return true, false
}

// Flags is the planner's outcome so far, to tell whether planning one type
// held anything back.
func (p *Planner) Flags() [3]bool { return [3]bool{p.held, p.rejected, p.waiting} }

// ClearFlags clears the outcome before planning one type of a pass and
// returns the pass's outcome so far, for MergeFlags.
func (p *Planner) ClearFlags() [3]bool {
	f := p.Flags()
	p.held, p.rejected, p.waiting = false, false, false
	return f
}

// MergeFlags reports whether the type planned since ClearFlags held
// anything back, and adds the pass's earlier outcome back.
func (p *Planner) MergeFlags(before [3]bool) bool {
	own := p.Flags() != [3]bool{}
	p.held, p.rejected, p.waiting = p.held || before[0], p.rejected || before[1], p.waiting || before[2]
	return own
}

// keep reports whether a resource gone from the snapshot must stay with the
// client for now: something the client holds or was sent still names it
// (make-before-break; the client's ACK of the change that stops naming it
// lets it go), or, for a cluster, the client still subscribes to it by name.
func (p *Planner) keep(t *xdstype.Type, name string, named bool) bool {
	if p.referenced(t.URL, name) {
		p.waiting = true
		return true
	}
	if named && t.MustPrecede {
		// A client that names a cluster in its subscription still uses it:
		// gRPC keeps a retired cluster while RPCs routed to it are in
		// flight, and unsubscribes after. Keep it until then, within the
		// same bound as any hold, so a name subscribed forever cannot pin
		// a deleted cluster.
		if !p.expired {
			p.held = true
			return true
		}
	}
	return false
}

// referenced reports whether anything the client holds or was sent names
// the resource.
func (p *Planner) referenced(typeURL, name string) bool {
	set, ok := p.refs[typeURL]
	if !ok {
		if p.refs == nil {
			p.refs = map[string]map[string]bool{}
		}
		set = map[string]bool{}
		for _, t := range p.cfg.ranked {
			h := p.view(t.URL)
			if h == nil {
				continue
			}
			l := h.Book()
			for _, m := range []map[string]*snapshot.Resource{l.Held, l.Acked} {
				for _, r := range m {
					if r == nil {
						continue
					}
					for _, ref := range r.Refs {
						if ref.TypeURL == typeURL {
							set[ref.Name] = true
						}
					}
				}
			}
		}
		p.refs[typeURL] = set
	}
	return set[name]
}

// HoldDecision is what a pass decided about holding back, for the stream
// to keep: whether something is held back (so that the client's next ACK
// plans again), since when a bounded hold runs (zero: none), and, when
// rewake is set, when to plan again as that bound will release it (zero:
// never).
type HoldDecision struct {
	Holding     bool
	Since, Wake time.Time
	Rewake      bool
}

// Decide returns the stream's hold state after this pass, from the one
// before it (holding, since). A full pass over every type replaces the
// previous outcome; a partial one (a response to a request) can only add
// to it.
func (p *Planner) Decide(full, holding bool, since time.Time) HoldDecision {
	d := HoldDecision{Holding: holding, Since: since}
	if full {
		d.Holding = false
		if !p.held {
			d.Since, d.Rewake = time.Time{}, true
		}
	}
	d.Holding = d.Holding || p.held || p.rejected || p.waiting
	if p.held {
		if d.Since.IsZero() {
			d.Since = p.Now
		}
		d.Wake, d.Rewake = d.Since.Add(p.cfg.holdTimeout), true
	}
	return d
}
