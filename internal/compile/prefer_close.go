package compile

import (
	"slices"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

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
func preferClose(reg *xdstype.Registry, services []model.Service, snap *snapshot.Snapshot, g nodegroup.Group) *snapshot.Snapshot {
	if g.Default || g.Match.Zone == "" {
		return snap
	}
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
		if near := closeFirst(cla, g.Match); near != nil {
			out = append(out, xdstype.Resource{Type: reg.Lookup(xdstype.EndpointURL), Name: s.Name, Message: near, File: s.Source.File, Line: s.Source.Line})
		}
	}
	if len(out) == 0 {
		return snap
	}
	near, err := snapshot.Build(reg, out)
	if err != nil {
		// Only priorities changed in assignments that were built: it
		// cannot fail; if it did, every endpoint stays at its priority.
		return snap
	}
	return snap.WithEndpointsOf(near)
}

// closeFirst is cla as Kubernetes' PreferClose serves a zone's clients:
// the localities of m's zone (and region, if m pins one) first, the others
// after them as a fallback, each side keeping its own priorities in order
// (so near 0, 1 and far 0 are 0, 1 and 2), numbered without gaps. It is
// nil when that changes nothing: no locality near, or none far.
func closeFirst(cla *endpointv3.ClusterLoadAssignment, m nodegroup.Match) *endpointv3.ClusterLoadAssignment {
	isNear := func(l *endpointv3.LocalityLbEndpoints) bool {
		return l.GetLocality().GetZone() == m.Zone && (m.Region == "" || l.GetLocality().GetRegion() == m.Region)
	}
	var near, far []uint32
	for _, l := range cla.GetEndpoints() {
		if isNear(l) {
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
		if isNear(l) {
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
