package compile

import (
	"slices"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// checkedAs is what a compile's checks of a service, route table or
// listener found clean, kept with its translation (translations) so that
// the next compile need not check it again: a change to one object of a
// thousand checks that object and what reads it, not all of them.
//
// The checks of an object read the object and facts of others (deps).
// The object is known by its config.Identity: equal identities are equal
// objects, their place in the files aside. Every fact of another object a
// check reads goes through ref, which records it; a kept check holds
// while each recorded fact reads the same. A service's checks also read
// whether a grpc target sends RPCs to it and the endpoints joined to it,
// kept here too. Only clean checks are kept: an object with a problem is
// checked every time, so its diagnostics (which name other objects, and
// lines) are always this compile's.
type checkedAs struct {
	id     config.Identity // zero: nothing kept
	deps   []dep
	grpc   bool           // a service's: a grpc target sends RPCs to it
	joined []model.Source // a service's: where its joined endpoints were written
	// inputs are the object's translation as emitted, placed where it was
	// written then.
	inputs []xdstype.Resource
}

// dep is one fact a check read of another object: whether the object of
// its kind ("service", "route table", "secret") and name exists, and
// what the checks read of it (factOf).
type dep struct {
	what, name string
	fact       uint8
}

const (
	factExists    = 1 << iota
	factAggregate // a service that aggregates others
	factCert      // a secret with a cert_file
	factCA        // a secret with a ca_file
)

// factOf is what a check may read of the object of kind what named name:
// whether it exists and, once ref found it, the fields the checks read
// of it (a service's aggregate, a secret's cert_file and ca_file). A new
// read of another object's field belongs here.
func (c *checker) factOf(what, name string) uint8 {
	var f uint8
	switch what {
	case "service":
		if s := c.services[name]; s != nil {
			f = factExists
			if len(s.Aggregate) > 0 {
				f |= factAggregate
			}
		}
	case "route table":
		if c.tables[name] != nil {
			f = factExists
		}
	case "secret":
		if s := c.secrets[name]; s != nil {
			f = factExists
			if s.CertFile != "" {
				f |= factCert
			}
			if s.CAFile != "" {
				f |= factCA
			}
		}
	default:
		panic("compile: no facts of a " + what)
	}
	return f
}

// record notes that a check read what ref found of the object of kind
// what named name, when the checks of this object are being kept.
func (c *checker) record(what, name string) {
	if c.deps != nil {
		*c.deps = append(*c.deps, dep{what, name, c.factOf(what, name)})
	}
}

// factsHold reports whether every fact in deps reads the same now.
func (c *checker) factsHold(deps []dep) bool {
	for _, d := range deps {
		if c.factOf(d.what, d.name) != d.fact {
			return false
		}
	}
	return true
}

// keepsChecks reports whether the checks of objects of kind k are kept
// between compiles: secrets read files, and a grpc target's checks read
// the targets checked before it (two servers on one address).
func keepsChecks(k objKind) bool {
	return k == objService || k == objTable || k == objListener
}

// identity is the i-th object of kind k's Identity, zero if unknown.
func (t *modelTranslator) identity(k objKind, i int) config.Identity {
	var ids []config.Identity
	switch k {
	case objService:
		ids = t.ids.Services
	case objTable:
		ids = t.ids.Routes
	case objListener:
		ids = t.ids.Listeners
	}
	if len(ids) != len(t.out[k]) {
		return config.Identity{} // not one an object: none is trusted
	}
	return ids[i]
}

// reuse gives o the last compile's translation of the i-th object of kind
// k, without checking it, when the last compile checked that very object
// clean and what its checks read of others reads the same, and reports
// whether it did.
func (t *modelTranslator) reuse(o *objOut, k objKind, i int) bool {
	id := t.identity(k, i)
	st := t.st
	if !id.Known() || st.t == nil {
		return false
	}
	holds := func(p *checkedAs) bool { return p.id == id && t.c.factsHold(p.deps) }
	switch k {
	case objService:
		s := &t.m.Services[i]
		p := st.prev.services[s.Name]
		joined := t.c.joined[s.Name]
		if p == nil || !holds(&p.checked) || p.checked.grpc != t.grpcServices[s.Name] || !slices.Equal(p.checked.joined, joined) ||
			len(joined) > 0 && !slices.Equal(p.svc.Endpoints, s.Endpoints) {
			return false
		}
		o.place(&p.checked, s.Source)
		st.next.services[s.Name] = p
	case objTable:
		rt := &t.m.Routes[i]
		p := st.prev.tables[rt.Name]
		if p == nil || !holds(&p.checked) {
			return false
		}
		o.place(&p.checked, rt.Source)
		st.next.tables[rt.Name] = p
		t.rateLimited[rt.Name] = p.rateLimited
	case objListener:
		l := &t.m.Listeners[i]
		p := st.prev.listeners[l.Name]
		if p == nil || !holds(&p.checked) || !sameAnswers(p.asked, t.isRateLimited) {
			return false
		}
		o.place(&p.checked, l.Source)
		st.next.listeners[l.Name] = p
	default:
		return false
	}
	return true
}

// place gives o the inputs kept, placed where the object is written now
// (src).
func (o *objOut) place(kept *checkedAs, src model.Source) {
	n := len(o.inputs)
	o.inputs = append(o.inputs, kept.inputs...)
	for j := n; j < len(o.inputs); j++ {
		o.inputs[j].File, o.inputs[j].Line = src.File, src.Line
	}
}

// keep records, for the next compile, what the checks of the i-th object
// of kind k (translated into o, reading deps of others) found: the
// checks when they found nothing wrong, else nothing. The entry the
// translation left is copied, not changed: it may be the last compile's.
func (t *modelTranslator) keep(o *objOut, k objKind, i int, deps []dep) {
	st := t.st
	if st.t == nil || !keepsChecks(k) {
		return
	}
	var kept checkedAs
	if id := t.identity(k, i); id.Known() && len(o.problems) == 0 && len(o.durations) == 0 {
		// The inputs copied: a service's are in this compile's slab,
		// which the next compiles must not keep alive.
		kept = checkedAs{id: id, deps: deps, inputs: slices.Clone(o.inputs)}
	}
	switch k {
	case objService:
		s := &t.m.Services[i]
		kept.grpc, kept.joined = t.grpcServices[s.Name], t.c.joined[s.Name]
		p := *st.next.services[s.Name]
		p.checked = kept
		st.next.services[s.Name] = &p
	case objTable:
		rt := &t.m.Routes[i]
		p := *st.next.tables[rt.Name]
		p.checked = kept
		st.next.tables[rt.Name] = &p
	case objListener:
		l := &t.m.Listeners[i]
		p := *st.next.listeners[l.Name]
		p.checked = kept
		st.next.listeners[l.Name] = &p
	}
}
