package compile

import (
	"fmt"
	"slices"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/translate"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// serverPlacement maps the server Listener of each gRPC target whose
// server names groups to those groups: the Listener goes to them alone,
// whatever the groups' scopes say.
type serverPlacement map[string]map[string]bool

// placeServers reads the targets' server.groups; a name that is no group
// is a dangling reference.
func placeServers(doc *config.Document) (serverPlacement, diag.List) {
	var problems diag.List
	p := serverPlacement{}
	for i := range doc.GRPC {
		g := &doc.GRPC[i]
		if g.Server == nil || len(g.Server.Groups) == 0 {
			continue
		}
		groups := map[string]bool{}
		for j, name := range g.Server.Groups {
			if !slices.ContainsFunc(doc.Groups, func(dg config.Group) bool { return dg.Name == name }) {
				problems = append(problems, diag.Diagnostic{File: g.Source.File, Line: g.Source.Line, Type: grpcKind, Name: g.Target,
					Field: fmt.Sprintf("server.groups[%d]", j), Message: fmt.Sprintf("%q: no group of that name (groups: name the node groups whose nodes are the servers)", name)})
			}
			groups[name] = true
		}
		p[translate.GRPCServerListenerName(g.Server.Listen)] = groups
	}
	return p, problems
}

// apply returns the group's snapshot with the server Listeners placed:
// those of targets naming the group added (with what they name), those of
// targets naming other groups taken out.
func (p serverPlacement) apply(reg *xdstype.Registry, all, snap *snapshot.Snapshot, group string) *snapshot.Snapshot {
	var drop []string
	add := snapshot.Names{}
	for name, groups := range p {
		has := snap.Set(xdstype.ListenerURL).Get(name) != nil
		switch {
		case groups[group] && !has && all.Set(xdstype.ListenerURL).Get(name) != nil:
			add.Add(xdstype.ListenerURL, name)
		case !groups[group] && has:
			drop = append(drop, name)
		}
	}
	if len(drop) > 0 {
		snap = snapshot.Without(snap, xdstype.ListenerURL, drop)
	}
	if len(add) == 0 {
		return snap
	}
	keep := snapshot.Closure(all, add)
	for _, set := range snap.Sets() {
		for _, n := range set.Names() {
			keep.Add(set.Type().URL, n)
		}
	}
	return snapshot.Subset(reg, all, keep)
}
