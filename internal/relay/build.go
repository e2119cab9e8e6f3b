package relay

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// checker decodes a resource of t as the upstream client's check.
func checker(t *xdstype.Type) func(a *anypb.Any) (string, error) {
	return func(a *anypb.Any) (string, error) {
		m := t.New()
		if err := proto.Unmarshal(a.GetValue(), m); err != nil {
			return "", fmt.Errorf("cannot decode a %s: %w", t.Kind, err)
		}
		name := xdstype.NameOf(m)
		if name == "" {
			return "", fmt.Errorf("a %s without a name", t.Kind)
		}
		return name, nil
	}
}

// inputs are the state's resources decoded, in type rank and name order.
func (r *Relay) inputs(key string, state upstream.State) []xdstype.Resource {
	var out []xdstype.Resource
	for _, t := range r.o.Registry.Ranked() {
		held := state[t.URL]
		for _, name := range slices.Sorted(maps.Keys(held)) {
			m := t.New()
			if proto.Unmarshal(held[name].Any.GetValue(), m) != nil {
				continue // checked on arrival; a kept file's may not be
			}
			out = append(out, xdstype.Resource{Type: t, Name: name, Message: m, File: "upstream of key " + key, TTL: held[name].TTL})
		}
	}
	return out
}

// subscribeNow subscribes the key to what its state names and its proxies
// ask for (subscribe), and returns the state to build, its inputs, and
// whether a name newly subscribed has not arrived. What the subscription
// let go of leaves the state at once: built from the state read before,
// the key would serve on a copy it no longer follows upstream. A build
// comes again for what the smaller config names in turn.
func (r *Relay) subscribeNow(ks *keyState) (upstream.State, []xdstype.Resource, bool) {
	state := ks.client.State()
	inputs := r.inputs(ks.key.Name, state)
	missing, dropped := r.subscribe(ks, state, inputs)
	if dropped {
		ks.kickBuild()
		after := ks.client.State()
		return after, r.inputs(ks.key.Name, after), missing
	}
	return state, inputs, missing
}

// subscribe sets what the key subscribes to by name: what its resources
// name of the named types (routes, endpoints, extension configs), which is
// what their clients ask for, and what its proxies ask for (asked.go). It
// reports whether a name it newly subscribed to has not arrived, nor been
// said not to exist (one waited for past Settle is not waited for again),
// and whether the subscription let go of a resource the state holds.
func (r *Relay) subscribe(ks *keyState, state upstream.State, inputs []xdstype.Resource) (missing, dropped bool) {
	wanted := map[string]map[string]bool{}
	r.mu.Lock()
	for _, t := range r.types {
		if !t.Wildcard {
			wanted[t.URL] = map[string]bool{}
			for _, n := range ks.askedOf(t.URL) {
				wanted[t.URL][n] = true
			}
		}
	}
	r.mu.Unlock()
	ks.keepAliases(wanted[xdstype.VirtualHostURL])
	routesOf(wanted[xdstype.VirtualHostURL], wanted[xdstype.RouteURL])
	for _, in := range inputs {
		if in.Type.Refs == nil {
			continue
		}
		for _, ref := range in.Type.Refs(in.Message) {
			if w := wanted[ref.TypeURL]; w != nil {
				w[ref.Name] = true
			}
		}
	}
	if ks.subscribed == nil {
		ks.subscribed, ks.pending = map[string][]string{}, map[resourceID]bool{}
	}
	for url, names := range wanted {
		list := slices.Sorted(maps.Keys(names))
		if ks.client.SetNames(url, list) {
			dropped = true
		}
		for _, n := range list {
			if _, had := slices.BinarySearch(ks.subscribed[url], n); !had && n != "*" {
				ks.pending[resourceID{url, n}] = true
			}
		}
		ks.subscribed[url] = list
	}
	ks.aliasesAgain(state, wanted[xdstype.VirtualHostURL])
	for id := range ks.pending {
		held := arrived(state, id)
		if held || !wanted[id.url][id.name] || ks.client.Gone(id.url, id.name) {
			delete(ks.pending, id)
		}
	}
	return len(ks.pending) > 0, dropped
}

// keepAliases adds to vhds the aliases the key's file kept virtual hosts
// for, until the key's upstream stream is up: then what the proxies ask
// for (they ask again on their new streams) is what is subscribed.
func (ks *keyState) keepAliases(vhds map[string]bool) {
	if len(ks.keptAliases) == 0 {
		return
	}
	if _, up, _ := ks.client.Connected(); up {
		ks.keptAliases = nil
		return
	}
	for _, a := range ks.keptAliases {
		vhds[a] = true
	}
}

// routesOf adds to routes the route configurations of the VHDS names
// asked for (aliases "ROUTES/HOST", or namespaces "ROUTES"): the relay's
// own xDS server resolves each proxy's aliases against them and the
// virtual hosts the upstream sent for the aliases. Both readings of a
// name are subscribed to; the wrong one does not exist upstream.
func routesOf(vhds, routes map[string]bool) {
	for n := range vhds {
		routes[n] = true
		if rc, _, ok := snapshot.VirtualHostNamespace(n); ok {
			routes[rc] = true
		}
	}
}

// aliasesAgain makes pending each VHDS name asked for that was a
// namespace (its route configuration held) and is no longer: it is an
// alias now, which the upstream answers with a virtual host, or with none,
// and a build before the answer would tell the proxies the alias does
// not exist meanwhile. Touched only by the key's builds.
func (ks *keyState) aliasesAgain(state upstream.State, vhds map[string]bool) {
	was := ks.namespaces
	ks.namespaces = map[string]bool{}
	for n := range vhds {
		if _, ok := state[xdstype.RouteURL][n]; ok {
			ks.namespaces[n] = true
		} else if was[n] {
			ks.pending[resourceID{xdstype.VirtualHostURL, n}] = true
		}
	}
}

// arrived reports whether the upstream sent what id subscribes to: the
// resource, or one sent for it as an alias.
func arrived(state upstream.State, id resourceID) bool {
	held := state[id.url]
	if _, ok := held[id.name]; ok {
		return true
	}
	if id.url == xdstype.VirtualHostURL {
		if _, ok := state[xdstype.RouteURL][id.name]; ok {
			return true // a namespace: its route configuration
		}
		for _, r := range held {
			if slices.Contains(r.Aliases, id.name) {
				return true
			}
		}
	}
	return false
}

// maxHeld bounds what a key's status says it held back.
const maxHeld = 50

// build makes the key's snapshot from its upstream resources and reports
// whether it or what was held back changed. A resource Pylon would not
// serve (it names what does not exist, a Secret among others, or fails
// validation) is held back: its previous good version is served if there
// is one, else nothing of it, and what names it is held back in turn.
func (r *Relay) build(ks *keyState, state upstream.State, inputs []xdstype.Resource) bool {
	r.mu.Lock()
	prev := ks.snap
	r.mu.Unlock()
	snap, held, old := buildKeeping(r.o.Registry, inputs, prev, ks.valid)
	if len(held) > maxHeld {
		held = append(held[:maxHeld], fmt.Sprintf("and %d more", len(held)-maxHeld))
	}
	r.mu.Lock()
	heldChanged := !slices.Equal(held, ks.heldBack)
	ks.heldBack = held
	changed := snap != nil && (prev == nil || prev.Version() != snap.Version())
	if changed {
		ks.snap = snap
	}
	r.mu.Unlock()
	if heldChanged && len(held) > 0 {
		r.o.Logger.Warn("relay: resources from upstream held back (not served downstream)", "key", ks.key.Name, "held_back", held)
	}
	if changed {
		if err := r.persist(ks, state, snap, old); err != nil {
			r.o.Logger.Warn("relay: cannot keep the key's config in the data folder", "key", ks.key.Name, "err", err)
		}
	}
	return changed || heldChanged
}

// maxPasses bounds the builds of one change: each pass holds back what
// the last one found wrong, and what named it comes up in the next.
const maxPasses = 16

// resourceID names a resource of a key: its type URL and name.
type resourceID struct{ url, name string }

// buildKeeping builds inputs, holding back each resource a build refuses
// (its previous version in prev taking its place, once). It returns nil
// when no pass builds, and which resources are served at their previous
// version (what the data folder must keep of them is that version, not
// the upstream's newest).
func buildKeeping(reg *xdstype.Registry, inputs []xdstype.Resource, prev *snapshot.Snapshot, v *snapshot.Validated) (*snapshot.Snapshot, []string, map[resourceID]bool) {
	var held []string
	type id struct{ kind, name string }
	usedOld := map[id]bool{}
	old := map[resourceID]bool{}
	for range maxPasses {
		snap, err := snapshot.BuildValidated(reg, inputs, v)
		if err == nil {
			return snap, held, old
		}
		var list diag.List
		if !errors.As(err, &list) {
			return nil, append(held, err.Error()), nil
		}
		bad := map[id]bool{}
		for _, d := range list {
			bad[id{d.Type, d.Name}] = true
			held = append(held, fmt.Sprintf("%s %q: %s: %s", d.Type, d.Name, d.Field, d.Message))
		}
		next := make([]xdstype.Resource, 0, len(inputs))
		for _, in := range inputs {
			k := id{in.Type.Kind, in.Name}
			switch was := prev.Set(in.Type.URL).Get(in.Name); {
			case !bad[k]:
				next = append(next, in)
			case was != nil && !usedOld[k]:
				usedOld[k] = true
				old[resourceID{in.Type.URL, in.Name}] = true
				in.Message = was.Message
				next = append(next, in)
			}
		}
		inputs = next
	}
	return nil, held, nil
}
