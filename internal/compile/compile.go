// Package compile turns configuration files into the fleet Pylon serves:
// decoding, validation, node groups and each group's snapshot. It is pure:
// files in, a fleet or diagnostics out.
package compile

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/grpcrules"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Compile validates files and builds the fleet they describe: the raw
// resources and the model's translation, checked together. Every resource is
// validated and marshalled once, whatever the number of groups; a group's
// snapshot shares the encodings. read reads the files the model names
// (certificates); nil reads none. The error is a diag.List.
func Compile(reg *xdstype.Registry, files []config.File, read ReadFile) (*fleet.Fleet, error) {
	f, _, err := compile(reg, files, read, true, nil)
	return f, err
}

// CompileWithWarnings is Compile that also returns what it accepts but an
// operator should hear of (snapshot.EmptyEndpointRoutes: traffic sent to
// a cluster with no endpoints), as `pylon validate` and the status show.
func CompileWithWarnings(reg *xdstype.Registry, files []config.File, read ReadFile) (*fleet.Fleet, diag.List, error) {
	return compile(reg, files, read, true, nil)
}

// Cache is what one compile leaves for the next of the same stream of
// changes: the items decoded from the files (config.Cache) and which
// resources passed validation (snapshot.Validated), so that a change
// decodes and validates only what it changed. The pipeline keeps one; the
// zero value is ready.
type Cache struct {
	load     config.Cache
	services translations
	valid    snapshot.Validated
	near     closeFirstCache
	empty    snapshot.EmptyEndpointsMemo
	// Groups are the node groups this replica serves (`pylon serve
	// --groups`; nil: all): only what their scopes reach is translated,
	// built and checked (reach.go); the others get an empty snapshot,
	// marked Unserved, and none of their own checks. Set it before the
	// first compile.
	Groups fleet.Selector
	// decodes, when set, is the decode cache this one shares, and
	// checkOnly says it keeps no translations (Whole's).
	decodes   *config.Cache
	checkOnly bool
	whole     struct {
		once sync.Once
		c    *Cache
	}
}

// Whole is the cache to check the whole config through, whatever Groups:
// a store's writes are checked so on every replica, so that a config one
// shard stores is one every shard accepts. It shares c's decodings (the
// config is decoded once for both) and keeps of the rest only which
// resources passed validation (snapshot.Validated.KeysOnly): a shard's
// memory holds its groups' share, and a write's check translates and
// encodes the whole config again, validating only what changed. Without
// Groups it is c.
func (c *Cache) Whole() *Cache {
	if c.Groups == nil {
		return c
	}
	c.whole.once.Do(func() {
		c.whole.c = &Cache{decodes: &c.load, checkOnly: true, valid: snapshot.Validated{KeysOnly: true}}
	})
	return c.whole.c
}

// Compile is Compile reusing and updating c.
func (c *Cache) Compile(reg *xdstype.Registry, files []config.File, read ReadFile) (*fleet.Fleet, error) {
	f, _, err := compile(reg, files, read, true, c)
	return f, err
}

// CompileWithWarnings is CompileWithWarnings reusing and updating c.
func (c *Cache) CompileWithWarnings(reg *xdstype.Registry, files []config.File, read ReadFile) (*fleet.Fleet, diag.List, error) {
	return compile(reg, files, read, true, c)
}

// CompileSkippingTests is Compile without running the config's route
// tests (they are still decoded and checked for form): `pylon explain`
// shows where requests go on a config whose tests fail, to say why.
func CompileSkippingTests(reg *xdstype.Registry, files []config.File, read ReadFile) (*fleet.Fleet, error) {
	f, _, err := compile(reg, files, read, false, nil)
	return f, err
}

// CompileSkippingTests is CompileSkippingTests through c: on a shard, a
// rollout's previous config compiled again is its groups' share, as the
// config it serves is.
func (c *Cache) CompileSkippingTests(reg *xdstype.Registry, files []config.File, read ReadFile) (*fleet.Fleet, error) {
	f, _, err := compile(reg, files, read, false, c)
	return f, err
}

// compile compiles files, through c when it is not nil, and returns the
// fleet with its warnings. A diagnostic names its field's own line, not
// its object's.
func compile(reg *xdstype.Registry, files []config.File, read ReadFile, runTests bool, c *Cache) (*fleet.Fleet, diag.List, error) {
	fleet, warnings, err := compileFiles(reg, files, read, runTests, c)
	if err != nil {
		return nil, nil, config.PlaceFields(files, err)
	}
	if len(warnings) > 0 {
		var placed diag.List
		if errors.As(config.PlaceFields(files, warnings), &placed) {
			warnings = placed
		}
	}
	return fleet, warnings, nil
}

func compileFiles(reg *xdstype.Registry, files []config.File, read ReadFile, runTests bool, c *Cache) (*fleet.Fleet, diag.List, error) {
	var load *config.Cache
	var services *translations
	var valid *snapshot.Validated
	var serves fleet.Selector
	var near *closeFirstCache
	var empty *snapshot.EmptyEndpointsMemo
	if c != nil {
		load, services, valid, serves, near, empty = &c.load, &c.services, &c.valid, c.Groups, &c.near, &c.empty
		if c.decodes != nil {
			load = c.decodes
		}
		if c.checkOnly {
			services, near, empty = nil, nil, nil
		}
	}
	doc, err := load.Load(reg, files)
	if err != nil {
		return nil, nil, err
	}
	// An endpoint of no service is reported with the model's problems
	// (the services' checks see the endpoints that did join).
	joinProblems := doc.JoinEndpoints()
	if read == nil {
		read = func(p string) ([]byte, error) { return nil, fmt.Errorf("reading files is not allowed here") }
	}
	dirs := make(map[string]string, len(files))
	for _, f := range files {
		dirs[f.Path] = f.Dir
	}
	st := services.begin()
	t := newModelTranslator(reg, doc, read, dirs, st)
	// raw is a copy: the model's resources are appended to it, never into
	// the document's array.
	raw, reached, names := shardInputs(reg, doc, serves, t)
	inputs, problems := t.emit(raw, reached)
	st.done()
	problems = append(joinProblems, problems...)
	policy, policyProblems := secretPolicy(doc.Secrets)
	problems = append(problems, policyProblems...)
	if err := problems.Err(); err != nil {
		return nil, nil, err
	}
	all, err := snapshot.BuildValidated(reg, inputs, valid)
	if err != nil {
		return nil, nil, err
	}
	if names == nil {
		names = func(typeURL string) []string { return all.Set(typeURL).Names() }
	}
	run := near.begin()
	fleet, err := group(reg, doc, all, names, inputsOf(inputs, xdstype.ListenerURL), inputsOf(inputs, xdstype.ScopedRouteURL), locator(inputs), serves, run)
	if err != nil {
		return nil, nil, err
	}
	run.done()
	// Raw Secrets under `resources` have no policy of their own: the
	// identities of the groups that hold them govern them.
	fleet.RestrictSecrets(policy)
	warnings := append(empty.Routes(all, locator(inputs)), preferCloseUnpinned(doc, fleet)...)
	warnings = append(warnings, servesNone(doc, serves)...)
	// Route tests run last, on exactly what would be served.
	if !runTests {
		return fleet, warnings, nil
	}
	if err := routeTests(fleet, doc.Tests).Err(); err != nil {
		return nil, nil, err
	}
	return fleet, warnings, nil
}

// servesNone warns when a shard's --groups takes none of the config's
// groups (a typo, most likely): it then builds and checks nothing, and
// refuses every node.
func servesNone(doc *config.Document, serves fleet.Selector) diag.List {
	if serves == nil || len(doc.Groups) == 0 {
		return nil
	}
	for i := range doc.Groups {
		if serves.Serves(doc.Groups[i].Name) {
			return nil
		}
	}
	return diag.List{{Message: fmt.Sprintf("this replica's --groups %s serves none of the config's %d groups: it builds and checks nothing of the config, and refuses every node", serves, len(doc.Groups))}}
}

// group builds the fleet: one snapshot for every node without groups, else
// each group's scoped snapshot. A snapshot with two listeners on one
// address, or two route scopes with one key, is refused. A group serves
// does not take gets an empty snapshot and is marked Unserved: its scope
// is neither built nor checked here (`pylon validate` and a store's
// writes check every group). names lists the resources of a type the
// config makes, which a group's scope is checked against: on a shard, all
// holds only what its groups reach.
func group(reg *xdstype.Registry, doc *config.Document, all *snapshot.Snapshot, names func(typeURL string) []string, listeners, scopes map[string]*xdstype.Resource, where func(typeURL, name string) *xdstype.Resource, serves fleet.Selector, near *closeFirstRun) (*fleet.Fleet, error) {
	reported, reportedScopes := map[[2]string]bool{}, map[[2]string]bool{}
	clashes := func(s *snapshot.Snapshot, group string) diag.List {
		problems := listenerClashes(s, group, listeners, reported)
		return append(problems, snapshot.ScopeKeyClashes(s, group, func(name string) *xdstype.Resource { return scopes[name] }, reportedScopes)...)
	}
	servers, problems := placeServers(doc)
	if err := problems.Err(); err != nil {
		return nil, err
	}
	if len(doc.Groups) == 0 {
		if err := clashes(all, "").Err(); err != nil {
			return nil, err
		}
		f := fleet.NewFleet(all, time.Time{})
		f.ServeOnly(serves)
		return f, nil
	}
	rules, problems := groups(reg, doc.Groups, names, doc.Services)
	if err := problems.Err(); err != nil {
		return nil, err
	}
	snaps := make([]*snapshot.Snapshot, len(rules))
	clients := grpcClientChecks{where: where}
	for i, g := range rules {
		if !serves.Serves(g.Name) {
			snaps[i] = snapshot.Subset(reg, all, snapshot.Names{})
			continue
		}
		snaps[i] = servers.apply(reg, all, scoped(reg, all, g), g.Name)
		snaps[i] = preferClose(reg, doc.Services, snaps[i], g, near)
		problems = append(problems, clashes(snaps[i], g.Name)...)
		// rules[i] is doc.Groups[i]: a group that was skipped is a problem
		// reported above.
		problems = append(problems, clients.check(snaps[i], g.Name, doc.Groups[i].Clients)...)
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	f := fleet.NewGroupedFleet(rules, snaps)
	f.ServeOnly(serves)
	return f, nil
}

// locator finds an input by type and name, for diagnostics; the index is
// built on the first call (most compiles have nothing to locate).
func locator(inputs []xdstype.Resource) func(typeURL, name string) *xdstype.Resource {
	var index map[[2]string]*xdstype.Resource
	return func(typeURL, name string) *xdstype.Resource {
		if index == nil {
			index = make(map[[2]string]*xdstype.Resource, len(inputs))
			for i := range inputs {
				index[[2]string{inputs[i].Type.URL, inputs[i].Name}] = &inputs[i]
			}
		}
		return index[[2]string{typeURL, name}]
	}
}

// inputsOf indexes the inputs of one type by name, for diagnostics.
func inputsOf(inputs []xdstype.Resource, typeURL string) map[string]*xdstype.Resource {
	out := map[string]*xdstype.Resource{}
	for i := range inputs {
		if inputs[i].Type.URL == typeURL {
			out[inputs[i].Name] = &inputs[i]
		}
	}
	return out
}

// secretPolicy collects the model secrets' identity patterns by secret
// name, for Fleet.RestrictSecrets.
func secretPolicy(secrets []model.Secret) (map[string][]string, diag.List) {
	var problems diag.List
	policy := map[string][]string{}
	for _, s := range secrets {
		if len(s.Identities) == 0 {
			continue
		}
		for _, d := range checkIdentities(s.Identities) {
			problems = append(problems, diag.Diagnostic{File: s.Source.File, Line: s.Source.Line, Type: "secret", Name: s.Name, Field: d.Field, Message: d.Message})
		}
		policy[s.Name] = s.Identities
	}
	return policy, problems
}

// checkIdentities checks identity patterns: each a valid path.Match glob,
// not empty. The diagnostics carry only the field and the message.
func checkIdentities(patterns []string) diag.List {
	var out diag.List
	for i, p := range patterns {
		field := fmt.Sprintf("identities[%d]", i)
		if p == "" {
			out = append(out, diag.Diagnostic{Field: field, Message: "empty pattern; write the identity, e.g. spiffe://example.org/ns/prod/sa/edge"})
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			out = append(out, diag.Diagnostic{Field: field, Message: fmt.Sprintf("bad pattern %q: %v", p, err)})
		}
	}
	return out
}

// groups checks the group rules and turns them into nodegroup's; names
// lists the resources of a type the config makes.
func groups(reg *xdstype.Registry, specs []config.Group, names func(typeURL string) []string, services []model.Service) (nodegroup.Groups, diag.List) {
	var problems diag.List
	bad := func(g *config.Group, field, format string, args ...any) {
		problems = append(problems, diag.Diagnostic{File: g.File, Line: g.Line, Type: "group", Name: g.Name, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	seen := map[string]*config.Group{}
	var def *config.Group
	rules := make(nodegroup.Groups, 0, len(specs))
	for i := range specs {
		g := &specs[i]
		if prev, dup := seen[g.Name]; dup {
			bad(g, "name", "duplicate group name: already defined at %s:%d", prev.File, prev.Line)
			continue
		}
		seen[g.Name] = g
		if g.Default {
			if def != nil {
				bad(g, "default", "a second default group: %q is already the default", def.Name)
			}
			def = g
		}
		checkGroupFields(g, bad)
		rule := nodegroup.Group{
			Name:    g.Name,
			Default: g.Default,
			Clients: g.Clients,
			Match: nodegroup.Match{
				ID: g.Match.ID, Cluster: g.Match.Cluster, Metadata: g.Match.Metadata,
				Region: g.Match.Region, Zone: g.Match.Zone, SubZone: g.Match.SubZone,
			},
			SuppressDeltaNotFound: g.DeltaNotFound != nil && !*g.DeltaNotFound,
			Identities:            g.Identities,
			Rollout:               g.Rollout,
		}
		rule.Scope = scopeOf(reg, g, names, services, bad)
		if !g.Default && len(g.Identities) == 0 && g.Match.ID == "" && g.Match.Cluster == "" && len(g.Match.Metadata) == 0 &&
			g.Match.Region == "" && g.Match.Zone == "" && g.Match.SubZone == "" {
			bad(g, "match", "empty: it would take every node; say `default: true` instead")
		}
		rules = append(rules, rule)
	}
	return rules, problems
}

// badGroup reports a problem of group g's field.
type badGroup func(g *config.Group, field, format string, args ...any)

// checkGroupFields checks g's match id, identities and clients.
func checkGroupFields(g *config.Group, bad badGroup) {
	if _, err := path.Match(g.Match.ID, ""); err != nil {
		bad(g, "match.id", "bad pattern %q: %v", g.Match.ID, err)
	}
	for _, d := range checkIdentities(g.Identities) {
		bad(g, d.Field, "%s", d.Message)
	}
	for j, name := range g.Clients {
		if _, ok := grpcrules.Parse(name); !ok {
			bad(g, fmt.Sprintf("clients[%d]", j), "%q is not a gRPC client Pylon knows the rules of (one of %v)", name, grpcrules.Names())
		}
	}
}

// scopeOf is g's scope by type URL (labels as the clusters of the
// services they select), each pattern checked against names.
func scopeOf(reg *xdstype.Registry, g *config.Group, names func(typeURL string) []string, services []model.Service, bad badGroup) map[string][]string {
	var scope map[string][]string
	if len(g.Scope) > 0 {
		scope = map[string][]string{}
	}
	kinds := make([]string, 0, len(g.Scope))
	for k := range g.Scope {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		if kind == "labels" {
			// Services by label: their clusters are roots.
			for j, sel := range g.Scope[kind] {
				names := labeled(services, sel)
				if len(names) == 0 {
					bad(g, fmt.Sprintf("scope.labels[%d]", j), "%q (key=value) selects no service", sel)
				}
				scope[xdstype.ClusterURL] = append(scope[xdstype.ClusterURL], names...)
			}
			continue
		}
		t := scopeType(reg, kind)
		if t == nil {
			bad(g, "scope."+kind, "unknown kind (one of services, labels, listeners, routes, clusters, endpoints, secrets, runtimes, extension_configs, scoped_routes, virtual_hosts)")
			continue
		}
		for j, pattern := range g.Scope[kind] {
			field := fmt.Sprintf("scope.%s[%d]", kind, j)
			if _, err := path.Match(pattern, ""); err != nil {
				bad(g, field, "bad pattern %q: %v", pattern, err)
				continue
			}
			if len(matchingNames(names(t.URL), pattern)) == 0 {
				// Most likely a typo; a group that silently sees nothing
				// is the classic outage.
				bad(g, field, "%q matches no %s", pattern, t.Kind)
			}
		}
		scope[t.URL] = append(scope[t.URL], g.Scope[kind]...)
	}
	return scope
}

// scopeType is the type a scope's kind names (but labels), nil if none.
func scopeType(reg *xdstype.Registry, kind string) *xdstype.Type {
	if kind == "services" {
		return reg.Lookup(xdstype.ClusterURL) // a service is its cluster
	}
	return reg.ByPlural(kind)
}

// scoped is the snapshot of a group: everything, or what its scope names
// and everything that names in turn.
func scoped(reg *xdstype.Registry, all *snapshot.Snapshot, g nodegroup.Group) *snapshot.Snapshot {
	if len(g.Scope) == 0 {
		return all
	}
	roots := snapshot.Names{}
	for typeURL, patterns := range g.Scope {
		for _, p := range patterns {
			for _, n := range matching(all.Set(typeURL), p) {
				roots.Add(typeURL, n)
			}
		}
	}
	return snapshot.Subset(reg, all, snapshot.Closure(all, roots))
}

// matching returns the names in set that pattern matches.
func matching(set *snapshot.Set, pattern string) []string {
	return matchingNames(set.Names(), pattern)
}

// matchingNames returns the names (sorted) that pattern matches: a
// pattern without wildcards is looked up, not matched against every name
// (a scope lists hundreds of services, a config holds thousands).
func matchingNames(names []string, pattern string) []string {
	if !strings.ContainsAny(pattern, `*?[\`) {
		if _, ok := slices.BinarySearch(names, pattern); ok {
			return []string{pattern}
		}
		return nil
	}
	var out []string
	for _, n := range names {
		if ok, _ := path.Match(pattern, n); ok {
			out = append(out, n)
		}
	}
	return out
}

// labeled returns the names of the services whose labels hold sel
// ("key=value").
func labeled(services []model.Service, sel string) []string {
	k, v, ok := strings.Cut(sel, "=")
	if !ok {
		return nil
	}
	var out []string
	for _, s := range services {
		if s.Labels[k] == v {
			out = append(out, s.Name)
		}
	}
	return out
}
