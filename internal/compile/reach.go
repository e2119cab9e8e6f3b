package compile

import (
	"slices"
	"sort"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/translate"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A shard (`pylon serve --groups`) builds only what the groups it serves
// can reach: their scopes' roots and everything those name in turn, as
// snapshot.Closure follows them. Which object makes which resource is
// known from the model before anything is translated (a service its
// Cluster and ClusterLoadAssignment, a route table its
// RouteConfiguration, ...), so the shard translates, reads, encodes and
// validates its groups' share of the config, not the fleet's. What no
// served group reaches is neither built nor checked here: the shards
// serving it refuse it, and `pylon validate` and a store's writes
// (Cache.Whole) check the whole config.

// reachKey is a resource by type URL and name.
type reachKey struct{ typeURL, name string }

// producer is what makes a resource: a raw resource of the config, or
// the i-th model object of a kind.
type producer struct {
	raw  bool
	kind objKind
	i    int
}

// reachIndex is, for every resource the config makes, what makes it,
// and the names of each type, sorted.
type reachIndex struct {
	by    map[reachKey][]producer
	names map[string][]string
}

// indexOf indexes what doc's raw resources and model objects make, by
// the names their translations give them.
func indexOf(doc *config.Document) *reachIndex {
	x := &reachIndex{by: map[reachKey][]producer{}, names: map[string][]string{}}
	add := func(typeURL, name string, p producer) {
		k := reachKey{typeURL, name}
		if len(x.by[k]) == 0 {
			x.names[typeURL] = append(x.names[typeURL], name)
		}
		x.by[k] = append(x.by[k], p)
	}
	for i := range doc.Resources {
		add(doc.Resources[i].Type.URL, doc.Resources[i].Name, producer{raw: true, i: i})
	}
	m := &doc.Model
	for i := range m.Services {
		s := &m.Services[i]
		add(xdstype.ClusterURL, s.Name, producer{kind: objService, i: i})
		if translate.HasAssignment(s) {
			add(xdstype.EndpointURL, s.Name, producer{kind: objService, i: i})
		}
	}
	for i := range m.Routes {
		add(xdstype.RouteURL, m.Routes[i].Name, producer{kind: objTable, i: i})
	}
	for i := range m.Listeners {
		add(xdstype.ListenerURL, m.Listeners[i].Name, producer{kind: objListener, i: i})
	}
	for i := range m.Secrets {
		add(xdstype.SecretURL, m.Secrets[i].Name, producer{kind: objSecret, i: i})
	}
	for i := range m.GRPC {
		g := &m.GRPC[i]
		add(xdstype.ListenerURL, g.Target, producer{kind: objGRPC, i: i})
		add(xdstype.RouteURL, g.Target, producer{kind: objGRPC, i: i})
		if g.Server != nil {
			add(xdstype.ListenerURL, translate.GRPCServerListenerName(g.Server.Listen), producer{kind: objGRPC, i: i})
		}
	}
	for _, names := range x.names {
		sort.Strings(names)
	}
	return x
}

// namesOf is the sorted names of the resources of typeURL the config
// makes, for the groups' checks ("matches no cluster").
func (x *reachIndex) namesOf(typeURL string) []string { return x.names[typeURL] }

// shardInputs translates what the groups serves takes can reach and
// returns the raw resources they reach, the resources reached (of those
// translated, emit keeps these), and the names of every resource the
// config makes (a group's scope is checked against the whole config, not
// against what was built). A compile that builds everything (no
// selector, no groups, or a served group without a scope: it sees
// everything) translates everything and returns every raw resource, and
// nil for the rest.
func shardInputs(reg *xdstype.Registry, doc *config.Document, serves fleet.Selector, t *modelTranslator) ([]xdstype.Resource, map[reachKey]bool, func(string) []string) {
	if serves != nil && len(doc.Groups) > 0 {
		x := indexOf(doc)
		if roots, ok := x.roots(reg, doc, serves); ok {
			if raw, reached, ok := x.reach(doc, t, roots); ok {
				return raw, reached, x.namesOf
			}
		}
	}
	t.all()
	return slices.Clone(doc.Resources), nil, nil
}

// roots is where the served groups' reach starts: what their scopes name
// (as scoped reads them) and the server Listeners placed in them
// (placeServers). ok is false when a served group has no scope.
func (x *reachIndex) roots(reg *xdstype.Registry, doc *config.Document, serves fleet.Selector) ([]reachKey, bool) {
	var roots []reachKey
	add := func(typeURL, pattern string) {
		for _, n := range matchingNames(x.names[typeURL], pattern) {
			roots = append(roots, reachKey{typeURL, n})
		}
	}
	for _, g := range doc.Groups {
		if !serves.Serves(g.Name) {
			continue
		}
		if len(g.Scope) == 0 {
			return nil, false
		}
		for kind, patterns := range g.Scope {
			for _, p := range patterns {
				if kind == "labels" {
					for _, n := range labeled(doc.Services, p) {
						add(xdstype.ClusterURL, n)
					}
				} else if t := scopeType(reg, kind); t != nil {
					add(t.URL, p)
				}
			}
		}
		for i := range doc.GRPC {
			if s := doc.GRPC[i].Server; s != nil && slices.Contains(s.Groups, g.Name) {
				roots = append(roots, reachKey{xdstype.ListenerURL, translate.GRPCServerListenerName(s.Listen)})
			}
		}
	}
	return roots, true
}

// reach translates what roots name and everything that names in turn,
// and returns the raw resources reached, in the config's order, and the
// resources reached (a translation may make more than was reached: a
// gRPC target's Listener, RouteConfiguration and server Listener; only
// those reached are built). ok is false when a translation made a
// resource the index did not foresee: the caller then builds everything.
func (x *reachIndex) reach(doc *config.Document, t *modelTranslator, roots []reachKey) (raw []xdstype.Resource, reached map[reachKey]bool, ok bool) {
	reached = map[reachKey]bool{}
	rawReached := make([]bool, len(doc.Resources))
	queue := roots
	for len(queue) > 0 {
		k := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if reached[k] {
			continue
		}
		reached[k] = true
		for _, p := range x.by[k] {
			var made []xdstype.Resource
			if p.raw {
				rawReached[p.i] = true
				made = doc.Resources[p.i : p.i+1]
			} else {
				made = t.translate(p.kind, p.i).inputs
				if !x.foresaw(p, made) {
					return nil, nil, false
				}
			}
			for i := range made {
				if made[i].Type.URL == k.typeURL && made[i].Name == k.name {
					queue = x.named(queue, &made[i])
				}
			}
		}
	}
	for i, r := range rawReached {
		if r {
			raw = append(raw, doc.Resources[i])
		}
	}
	return raw, reached, true
}

// foresaw reports whether the index has p making each of made.
func (x *reachIndex) foresaw(p producer, made []xdstype.Resource) bool {
	for i := range made {
		if made[i].Type == nil || !slices.Contains(x.by[reachKey{made[i].Type.URL, made[i].Name}], p) {
			return false
		}
	}
	return true
}

// named appends to queue what r names, as snapshot.Closure follows it:
// its references, and a VHDS route configuration's virtual hosts.
func (x *reachIndex) named(queue []reachKey, r *xdstype.Resource) []reachKey {
	if r.Type.Refs != nil {
		for _, ref := range r.Type.Refs(r.Message) {
			queue = append(queue, reachKey{ref.TypeURL, ref.Name})
		}
	}
	if rc, ok := r.Message.(*routev3.RouteConfiguration); ok && rc.GetVhds() != nil {
		for _, n := range snapshot.VirtualHostsIn(x.names[xdstype.VirtualHostURL], r.Name) {
			queue = append(queue, reachKey{xdstype.VirtualHostURL, n})
		}
	}
	return queue
}
