package protocol

import (
	"slices"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// VHDS on demand. Envoy subscribes (delta only) to a route configuration's
// name, a namespace standing for the virtual hosts named
// "<route configuration>/...", and, when a request's host matches none of
// the virtual hosts it has, to the alias "<route configuration>/<host>"
// (the on_demand filter). It is answered with the virtual host serving that
// host, under the virtual host's own name with the alias in `aliases`, or,
// when none does, with an empty resource named by the alias (Envoy then
// answers 404 rather than wait). What a client holds is keyed by virtual
// host names, so the ledger, make-before-break and removals work as for
// any type; which alias was answered with what is the watch's own
// (vhdsState). A VirtualHost watch never takes the shared-plan path
// (planShared, canons): its subscription is of aliases, not of the names
// it is sent, and each stream answers its own aliases.

// vhdsState is what a VirtualHost watch answered each alias with, by
// alias; an alias leaves it when unsubscribed or subscribed again.
type vhdsState struct {
	answered map[string]vhdsAnswer
	// idx is the alias index of the content at idxAt, held so that the
	// shared cache keeps it while this stream answers against it.
	idx   *vhdsIndex
	idxAt string
}

// index returns the alias index of the content at, shared by every stream
// answering against that content.
func (w *DeltaWatch) index(at string, set, routes *snapshot.Set) *vhdsIndex {
	v := w.VHDS
	if v.idx == nil || v.idxAt != at {
		v.idx = w.shared.vhdsIndexes.Get(at, func() *vhdsIndex { return newVHDSIndex(set, routes) })
		v.idxAt = at
	}
	return v.idx
}

// vhdsAnswer is what an alias was answered with: the virtual host's name,
// or "" for not found; at is the content it was last resolved against
// (ContentAt), so that an alias is resolved again only when the config
// changed, not on every request of a client that asked for thousands.
type vhdsAnswer struct {
	vhost, at string
}

// ContentAt identifies what resolving an alias reads: the virtual hosts,
// and the route configurations (which names are namespaces, and whether
// the port counts). Versions are content hashes.
func ContentAt(set, routes *snapshot.Set) string {
	return set.Version() + "/" + routes.Version()
}

// vhdsCovers is covers for a VirtualHost watch: a name subscribed, a
// virtual host the client holds or ACKed, or one of a namespace it
// subscribes to (what a reconnecting client says it holds).
func (w *DeltaWatch) vhdsCovers(name string) bool {
	if _, ok := w.Names[name]; ok {
		return true
	}
	if _, ok := w.Held[name]; ok {
		return true
	}
	if _, ok := w.Acked[name]; ok {
		return true
	}
	rc, _, ok := snapshot.VirtualHostNamespace(name)
	_, named := w.Names[rc]
	return ok && named
}

// aliasOf reads a subscribed name as the alias "<route configuration>/<host>";
// ok is false for a namespace (a route configuration's own name, which
// sends nothing by itself: the base virtual hosts are the route
// configuration's inline ones) and for a name without a "/".
func aliasOf(name string, routes *snapshot.Set) (rc, host string, ok bool) {
	if routes.Get(name) != nil {
		return "", "", false
	}
	return snapshot.VirtualHostNamespace(name)
}

// withoutPort is host without its port, as Envoy's
// HeaderUtility::getPortStart cuts one: everything from the last ":",
// unless a "]" comes after it (an IPv6 address in brackets, "[::1]").
func withoutPort(host string) string {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.LastIndexByte(host, ']') > i {
		return host
	}
	return host[:i]
}

// PlanVHDS is plan for a VirtualHost watch: each alias not yet answered
// (or subscribed again, or whose virtual host changed) is answered with
// the virtual host serving it, carrying every alias of the stream that
// resolves to it, or as not found; a virtual host the client holds is
// sent again when it changes and removed when it is gone. A virtual host
// naming a cluster the client lacks waits, as any route does.
func (w *DeltaWatch) PlanVHDS(p *Planner, set, routes *snapshot.Set, ttl bool) DeltaPlan {
	v := w.VHDS
	for a := range v.answered {
		if _, ok := w.Names[a]; !ok {
			delete(v.answered, a) // unsubscribed: answered afresh if it comes back
		}
	}
	send := map[string]*snapshot.Resource{}
	carried := map[string][]string{} // per virtual host, the aliases it serves
	var missing []string
	at := ContentAt(set, routes)
	idx := w.index(at, set, routes)
	for a := range w.Names {
		prev, done := v.answered[a]
		if done && prev.at == at {
			// Resolved against this very content: the answer stands.
			if prev.vhost != "" {
				carried[prev.vhost] = append(carried[prev.vhost], a)
			}
			continue
		}
		rc, host, ok := aliasOf(a, routes)
		if !ok {
			continue
		}
		r := idx.resolve(rc, host)
		name := ""
		if r != nil {
			name = r.Name
			carried[name] = append(carried[name], a)
		}
		switch {
		case done && prev.vhost == name:
			// The same answer at new content: nothing to send for the
			// alias (a change of its virtual host is sent below).
			v.answered[a] = vhdsAnswer{name, at}
		case r == nil:
			missing = append(missing, a)
		case !p.mustWait(r):
			send[name] = r
		}
	}
	d := DeltaPlan{answersAt: at}
	for n, cur := range w.Held {
		switch r := set.Get(n); {
		case cur == nil:
			// A subscribed name told it does not exist: not a virtual host.
		case r == nil:
			d.Removed = append(d.Removed, n)
			d.changes = append(d.changes, change{n, nil})
		case !sameVersion(cur, r) && send[n] == nil && !p.mustWait(r):
			send[n] = r
		}
	}
	w.vhdsResources(&d, set, send, carried, missing, ttl)
	return d
}

// vhdsResources fills d with the virtual hosts to send, each with the
// aliases it serves, and the empty aliased resources of the aliases no
// virtual host serves; it records in d.answers what each alias is answered
// with.
func (w *DeltaWatch) vhdsResources(d *DeltaPlan, set *snapshot.Set, send map[string]*snapshot.Resource, carried map[string][]string, missing []string, ttl bool) {
	d.answers = map[string]vhdsAnswer{}
	for n, r := range send {
		aliases := carried[n]
		slices.Sort(aliases)
		d.Resources = append(d.Resources, withAliases(r.ForDelta(ttl), aliases))
		d.changes = append(d.changes, change{n, r})
		for _, a := range aliases {
			d.answers[a] = vhdsAnswer{n, d.answersAt}
		}
	}
	for _, a := range missing {
		d.answers[a] = vhdsAnswer{"", d.answersAt}
		if send[a] != nil {
			// A virtual host of the alias's very name goes out in this
			// response: its name is in the update, and a name is never
			// twice in one response (X8).
			continue
		}
		d.Resources = append(d.Resources, &discoveryv3.Resource{Name: a, Version: set.Version(), Aliases: []string{a}})
	}
	slices.SortFunc(d.Resources, func(a, b *discoveryv3.Resource) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(d.Removed)
}

// withAliases is r with aliases, sharing r's encoded resource: r itself is
// shared by every stream and never written.
func withAliases(r *discoveryv3.Resource, aliases []string) *discoveryv3.Resource {
	if len(aliases) == 0 {
		return r
	}
	return &discoveryv3.Resource{Name: r.Name, Version: r.Version, Resource: r.Resource, Ttl: r.Ttl, CacheControl: r.CacheControl, Metadata: r.Metadata, Aliases: aliases}
}

// again forgets what the aliases just subscribed were answered with: an
// alias subscribed again is answered again (X29). v may be nil (not a
// VirtualHost watch).
func (v *vhdsState) again(subscribe []string) {
	if v == nil {
		return
	}
	for _, n := range subscribe {
		delete(v.answered, n)
	}
}

// recordAnswers notes what a response sent answered each alias with.
func (v *vhdsState) recordAnswers(answers map[string]vhdsAnswer) {
	if len(answers) == 0 {
		return
	}
	if v.answered == nil {
		v.answered = map[string]vhdsAnswer{}
	}
	for a, n := range answers {
		v.answered[a] = n
	}
}
