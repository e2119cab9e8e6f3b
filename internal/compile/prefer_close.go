package compile

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/translate"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// trafficDistributions are the traffic_distribution values a service may
// name: Kubernetes' PreferClose and its newer name PreferSameZone, which
// mean the same.
var trafficDistributions = []string{"PreferClose", "PreferSameZone"}

// checkTrafficDistribution refuses a traffic_distribution Pylon does not
// serve, and one on a service of no endpoints of its own.
func (c *checker) checkTrafficDistribution(s *model.Service) {
	const kind, field = "service", "traffic_distribution"
	switch v := s.TrafficDistribution; {
	case v == "":
	case v == "PreferSameNode":
		c.add(s.Source, kind, s.Name, field, "%q: Pylon cannot tell a proxy's node, only its zone; write PreferClose (the Kubernetes source serves a Service's PreferSameNode so)", v)
	case !slices.Contains(trafficDistributions, v):
		c.add(s.Source, kind, s.Name, field, "%q is not one of %v (Kubernetes' spec.trafficDistribution values Pylon serves)", v, trafficDistributions)
	case !translate.HasAssignment(s):
		c.add(s.Source, kind, s.Name, field, "%q orders a service's endpoints by zone; an aggregate or logical_dns service has none of its own", v)
	}
}

// preferClose is a group's snapshot with the assignment of each service
// of traffic_distribution PreferClose rewritten close first, when the
// group's match pins a zone (closeFirst); other groups' snapshots, a
// default group's included (its nodes are of any zone), are snap itself.
// run keeps the rewrites from one compile to the next (nil: none kept).
func preferClose(reg *xdstype.Registry, services []model.Service, snap *snapshot.Snapshot, g nodegroup.Group, run *closeFirstRun) *snapshot.Snapshot {
	if g.Default || g.Match.Zone == "" {
		return snap
	}
	at := locality{region: g.Match.Region, zone: g.Match.Zone}
	set := snap.Set(xdstype.EndpointURL)
	var out []xdstype.Resource
	for i := range services {
		s := &services[i]
		if s.TrafficDistribution == "" {
			continue
		}
		r := set.Get(s.Name)
		if r == nil {
			continue // not in the group's scope
		}
		cla, ok := r.Message.(*endpointv3.ClusterLoadAssignment)
		if !ok {
			continue
		}
		if near := run.rewrite(cla, at); near != nil {
			out = append(out, xdstype.Resource{Type: reg.Lookup(xdstype.EndpointURL), Name: s.Name, Message: near, File: s.Source.File, Line: s.Source.Line})
		}
	}
	if len(out) == 0 {
		return snap
	}
	near, err := snapshot.BuildValidated(reg, out, run.validated(g.Name))
	if err != nil {
		// Only priorities changed in assignments that were built: it
		// cannot fail; if it did, every endpoint stays at its priority.
		return snap
	}
	return snap.WithEndpointsOf(near)
}

// locality is what a group's match pins that closeFirst puts first.
type locality struct{ region, zone string }

// closeFirstCache keeps the last compile's close-first assignments, by
// the assignment each was made of and the locality it puts first, and a
// snapshot.Validated per locality: the assignment of a service a change
// did not touch is the same message as in the compile before (its
// translation is reused), so its close-first form is too, and the build
// neither encodes nor validates it again. Without it, a change to one of
// a thousand PreferClose services rewrote and validated all of them, for
// every zone's group.
type closeFirstCache struct {
	mu    sync.Mutex
	last  map[closeKey]*endpointv3.ClusterLoadAssignment
	valid map[string]*snapshot.Validated // by group
}

type closeKey struct {
	from *endpointv3.ClusterLoadAssignment
	at   locality
}

// closeFirstRun is one compile's use of a closeFirstCache.
type closeFirstRun struct {
	c          *closeFirstCache
	prev, next map[closeKey]*endpointv3.ClusterLoadAssignment
	valid      map[string]*snapshot.Validated
}

func (c *closeFirstCache) begin() *closeFirstRun {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return &closeFirstRun{c: c, prev: c.last, next: map[closeKey]*endpointv3.ClusterLoadAssignment{}, valid: map[string]*snapshot.Validated{}}
}

// rewrite is closeFirst(cla, at), the one of the compile before when cla
// is the same message.
func (r *closeFirstRun) rewrite(cla *endpointv3.ClusterLoadAssignment, at locality) *endpointv3.ClusterLoadAssignment {
	if r == nil {
		return closeFirst(cla, at)
	}
	k := closeKey{cla, at}
	near, ok := r.next[k]
	if !ok {
		if near, ok = r.prev[k]; !ok {
			near = closeFirst(cla, at)
		}
		r.next[k] = near
	}
	return near
}

// validated is the Validated of group's close-first builds: one a group,
// since a Validated keeps what its last build saw, and two groups of one
// zone with other scopes, sharing one, undid each other's every compile.
func (r *closeFirstRun) validated(group string) *snapshot.Validated {
	if r == nil {
		return nil
	}
	v := r.valid[group]
	if v == nil {
		r.c.mu.Lock()
		if v = r.c.valid[group]; v == nil {
			v = &snapshot.Validated{}
		}
		r.c.mu.Unlock()
		r.valid[group] = v
	}
	return v
}

// done keeps this compile's rewrites, and the Validated of the groups
// it built, for the next.
func (r *closeFirstRun) done() {
	if r == nil {
		return
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.last, r.c.valid = r.next, r.valid
}

// closeFirst is cla as Kubernetes' PreferClose serves a zone's clients:
// the localities of at's zone (and region, if it names one) first, the others
// after them as a fallback, each side keeping its own priorities in order
// (so near 0, 1 and far 0 are 0, 1 and 2), numbered without gaps. It is
// nil when that changes nothing: no locality near, or none far.
func closeFirst(cla *endpointv3.ClusterLoadAssignment, at locality) *endpointv3.ClusterLoadAssignment {
	var near, far []uint32
	for _, l := range cla.GetEndpoints() {
		if at.holds(l) {
			near = append(near, l.GetPriority())
		} else {
			far = append(far, l.GetPriority())
		}
	}
	if len(near) == 0 || len(far) == 0 {
		return nil
	}
	slices.Sort(near)
	slices.Sort(far)
	near, far = slices.Compact(near), slices.Compact(far)
	// Shallow copies: the endpoints are shared, never changed (a built
	// resource's message is immutable); a deep copy of every endpoint
	// took a third of the rewrite.
	out := shallow(cla)
	out.Endpoints = make([]*endpointv3.LocalityLbEndpoints, len(cla.Endpoints))
	for i, l := range cla.Endpoints {
		out.Endpoints[i] = shallow(l)
		if at.holds(l) {
			out.Endpoints[i].Priority = uint32(slices.Index(near, l.Priority))
		} else {
			out.Endpoints[i].Priority = uint32(len(near) + slices.Index(far, l.Priority))
		}
	}
	return out
}

// shallow is a new message of m's fields, their values shared with m.
func shallow[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return dst.Interface().(M)
}

// maxNamedPreferClose bounds the services a warning names.
const maxNamedPreferClose = 3

// preferCloseUnpinned warns of each group (but the default one, whose
// nodes are of any zone) that receives PreferClose services yet pins no
// zone: its nodes get every zone's endpoints at priority 0, which an
// operator who wrote PreferClose may not expect; and of a group that
// pins a zone none of them has an endpoint in (a typo, or a cluster's
// name as the region): the same, silently. One warning a group.
func preferCloseUnpinned(doc *config.Document, f *fleet.Fleet) diag.List {
	var prefer []string
	for i := range doc.Services {
		if doc.Services[i].TrafficDistribution != "" {
			prefer = append(prefer, doc.Services[i].Name)
		}
	}
	if len(prefer) == 0 {
		return nil
	}
	var out diag.List
	for i := range doc.Groups {
		rule := &doc.Groups[i]
		g, _ := f.Lookup(rule.Name)
		if rule.Default || g == nil || g.Unserved {
			continue
		}
		at := locality{region: rule.Match.Region, zone: rule.Match.Zone}
		var got []string
		near := false
		for _, name := range prefer {
			r := g.Snapshot.Set(xdstype.EndpointURL).Get(name)
			if r == nil {
				continue
			}
			got = append(got, name)
			if cla, ok := r.Message.(*endpointv3.ClusterLoadAssignment); ok && at.zone != "" && hasNear(cla, at) {
				near = true
			}
		}
		if len(got) == 0 || near {
			continue
		}
		named := strings.Join(got[:min(len(got), maxNamedPreferClose)], ", ")
		if len(got) > maxNamedPreferClose {
			named += fmt.Sprintf(" and %d more", len(got)-maxNamedPreferClose)
		}
		d := diag.Diagnostic{File: rule.File, Line: rule.Line, Type: "group", Name: rule.Name, Field: "match.zone", Message: fmt.Sprintf(
			"pins no zone, so the traffic_distribution of the %d service(s) it receives (%s) orders nothing: its nodes get every zone's endpoints at priority 0; pin match.zone (a group per zone) to serve them close first", len(got), named)}
		if at.zone != "" {
			d.Message = fmt.Sprintf("none of the %d PreferClose service(s) it receives (%s) has an endpoint in zone %q%s: its nodes get every endpoint at priority 0; check the zone's name (an endpoint's region from --kube-cluster is the cluster's name)",
				len(got), named, at.zone, regionSuffix(at.region))
		}
		out = append(out, d)
	}
	return out
}

func regionSuffix(region string) string {
	if region == "" {
		return ""
	}
	return fmt.Sprintf(" of region %q", region)
}

// hasNear reports whether cla has a locality at at.
func hasNear(cla *endpointv3.ClusterLoadAssignment, at locality) bool {
	return slices.ContainsFunc(cla.GetEndpoints(), at.holds)
}

// holds reports whether l is in at's zone (and region, if at names one):
// what closeFirst puts first and hasNear looks for, one rule.
func (at locality) holds(l *endpointv3.LocalityLbEndpoints) bool {
	return l.GetLocality().GetZone() == at.zone && (at.region == "" || l.GetLocality().GetRegion() == at.region)
}
