package xds

import (
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// deltaWatch is one delta stream's state for one resource type: the
// subscription and, per resource, the version the client holds. Like the
// state-of-the-world watch it is a plain value owned by the stream's loop.
type deltaWatch struct {
	typ *xdstype.Type

	started  bool
	wildcard bool
	legacy   bool                // wildcard by an empty first request (Listener, Cluster)
	names    map[string]struct{} // explicit subscriptions, never "*"
	// held maps a name to the version the client holds. An empty version
	// means the client was told the resource does not exist and stays
	// subscribed to it; an absent name means the client holds nothing.
	held map[string]string
	// force holds names the client just subscribed to: they are answered on
	// the next response even if the client seems to hold them (X29).
	force map[string]struct{}

	// sent maps the nonces of responses not yet ACKed or NACKed to the type
	// version they carried, for status. Bounded: a client that never
	// answers cannot grow it.
	sent map[string]string
}

const maxOutstanding = 64

func newDeltaWatch(t *xdstype.Type) *deltaWatch {
	return &deltaWatch{
		typ:   t,
		names: map[string]struct{}{},
		held:  map[string]string{},
		force: map[string]struct{}{},
		sent:  map[string]string{},
	}
}

// subscribe applies a request's subscription changes and reports whether a
// response is owed. Changes apply whatever the request's nonce (X27): the
// nonce only tells which response an ACK or NACK is about.
func (w *deltaWatch) subscribe(req *discoveryv3.DeltaDiscoveryRequest) (owe bool) {
	if !w.started {
		w.started = true
		// What the client already holds, from an earlier stream (X35): only
		// on the first request for the type.
		for n, v := range req.GetInitialResourceVersions() {
			w.held[n] = v
		}
		if len(req.GetResourceNamesSubscribe()) == 0 && w.typ.Wildcard {
			// The legacy wildcard: an empty first request for a wildcard
			// type (X32).
			w.wildcard, w.legacy = true, true
		}
		// The first request is always answered, even when the client holds
		// everything already: its initial fetch waits for a response.
		owe = true
	}
	star, named := false, false
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == wildcardName {
			star = true
			continue
		}
		named = true
		w.names[n] = struct{}{}
		if _, held := req.GetInitialResourceVersions()[n]; !held {
			// Answered even if this stream believes the client has it
			// (X29), but not when the client itself just said which
			// version it holds (X35).
			w.force[n] = struct{}{}
		}
	}
	switch {
	case star:
		w.wildcard, w.legacy = true, false
		owe = true
	case named && w.legacy:
		// Subscribing to a name ends the legacy wildcard; a client that
		// wants both subscribes to "*" explicitly.
		w.wildcard, w.legacy = false, false
		w.dropUnnamed()
	}
	if named {
		owe = true
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		if n == wildcardName {
			if w.wildcard {
				w.wildcard, w.legacy = false, false
				w.dropUnnamed()
			}
			continue
		}
		if _, ok := w.names[n]; !ok {
			// Never subscribed: nothing to do (X30).
			continue
		}
		delete(w.names, n)
		delete(w.force, n)
		if !w.wildcard || w.held[n] == "" {
			// The client drops it, unless it still has it through the
			// wildcard (X31).
			delete(w.held, n)
		}
	}
	return owe
}

// dropUnnamed forgets resources the client held only through a wildcard
// that has ended: it drops them itself.
func (w *deltaWatch) dropUnnamed() {
	for n := range w.held {
		if _, ok := w.names[n]; !ok {
			delete(w.held, n)
		}
	}
}

// diff returns what the client lacks: every subscribed resource whose
// version differs from what it holds (X25), and in removed the names it
// holds that are gone (X34) or that it subscribed to and do not exist
// (X33, unless notFound is false).
func (w *deltaWatch) diff(set *snapshot.Set, notFound, ttl bool) (resources []*discoveryv3.Resource, removed []string) {
	send := func(r *snapshot.Resource) {
		if _, forced := w.force[r.Name]; forced || w.held[r.Name] != r.Version {
			resources = append(resources, r.ForDelta(ttl))
		}
	}
	if w.wildcard {
		for _, n := range set.Names() {
			send(set.Get(n))
		}
	}
	for n := range w.names {
		r := set.Get(n)
		switch {
		case r != nil:
			if !w.wildcard {
				send(r)
			}
		case w.held[n] != "":
			removed = append(removed, n) // deleted since the client got it
		default:
			_, forced := w.force[n]
			_, told := w.held[n]
			if notFound && (forced || !told) {
				removed = append(removed, n) // does not exist
			}
		}
	}
	for n, v := range w.held {
		if _, named := w.names[n]; !named && v != "" && set.Get(n) == nil {
			removed = append(removed, n) // held through the wildcard, now gone
		}
	}
	sort.Slice(resources, func(i, j int) bool { return resources[i].Name < resources[j].Name })
	sort.Strings(removed)
	return resources, removed
}

// heartbeats lists the TTL refreshes for the resources with a TTL that the
// client holds at their current version (X41).
func (w *deltaWatch) heartbeats(set *snapshot.Set) []*discoveryv3.Resource {
	var out []*discoveryv3.Resource
	for _, n := range set.TTLNames() {
		if r := set.Get(n); w.held[n] == r.Version {
			out = append(out, r.Heartbeat())
		}
	}
	return out
}

// sentResponse records what a response gave the client.
func (w *deltaWatch) sentResponse(nonce, version string, resources []*discoveryv3.Resource, removed []string) {
	for _, r := range resources {
		w.held[r.Name] = r.Version
	}
	for _, n := range removed {
		if _, named := w.names[n]; named {
			w.held[n] = "" // still subscribed, told it does not exist
		} else {
			delete(w.held, n)
		}
	}
	clear(w.force)
	if len(w.sent) >= maxOutstanding {
		clear(w.sent)
	}
	w.sent[nonce] = version
}

// answered takes the response a nonce refers to off the outstanding list
// and returns its version ("" if unknown or too old).
func (w *deltaWatch) answered(nonce string) string {
	v := w.sent[nonce]
	delete(w.sent, nonce)
	return v
}
