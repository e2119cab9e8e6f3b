package snapshot

import (
	"fmt"
	"strings"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// EmptyEndpointRoutes warns of traffic sent to a cluster whose endpoint
// set is empty: a route (or weighted cluster) of a RouteConfiguration or
// VirtualHost, or a Listener's TCP proxy, naming a Cluster whose
// ClusterLoadAssignment (EDS) or load_assignment (static, DNS) has no
// endpoints. Envoy accepts it and answers 503 ("no healthy upstream")
// until endpoints arrive, which is normal while registrants come up and a
// typo otherwise: a warning, not a refusal. Request mirrors are not
// counted (a mirror's answer is dropped). where locates a resource's
// input, nil if unknown.
func EmptyEndpointRoutes(s *Snapshot, where func(typeURL, name string) *xdstype.Resource) diag.List {
	return (*EmptyEndpointsMemo)(nil).Routes(s, where)
}

// EmptyEndpointsMemo keeps, from one EmptyEndpointRoutes to the next,
// which clusters have an empty endpoint set: while a snapshot's Clusters
// and endpoints are the very sets of the last (snapshot.Validated hands a
// build the sets of the build before where their resources did not
// change), they are not judged again, and a config with none (the usual
// case) costs a look, not a walk over every route. Safe for concurrent
// use; the zero value is ready, and a nil one keeps nothing.
type EmptyEndpointsMemo struct {
	mu                  sync.Mutex
	clusters, endpoints *Set
	empty               map[string]emptySet
}

// emptySet is where a cluster's empty endpoint set is: the
// ClusterLoadAssignment named (EDS), or the cluster's load_assignment
// when cla is "".
type emptySet struct{ cla string }

// Routes is EmptyEndpointRoutes, through m.
func (m *EmptyEndpointsMemo) Routes(s *Snapshot, where func(typeURL, name string) *xdstype.Resource) diag.List {
	empty := m.emptyClusters(s)
	if len(empty) == 0 {
		return nil
	}
	var out diag.List
	for _, url := range []string{xdstype.ListenerURL, xdstype.RouteURL, xdstype.VirtualHostURL} {
		set := s.Set(url)
		for _, name := range set.Names() {
			r := set.Get(name)
			for _, ref := range r.Refs {
				if ref.TypeURL != xdstype.ClusterURL || strings.Contains(ref.Field, "request_mirror_policies") {
					continue
				}
				e, ok := empty[ref.Name]
				if !ok {
					continue
				}
				d := diag.Diagnostic{Type: set.Type().Kind, Name: name, Field: ref.Field, Message: fmt.Sprintf(
					"sends traffic to Cluster %q, whose endpoint set is empty (%s): Envoy answers 503, no healthy upstream, until endpoints are added", ref.Name, e.what(ref.Name, where))}
				if in := where(url, name); in != nil {
					d.File, d.Line = in.File, in.Line
				}
				out = append(out, d)
			}
		}
	}
	return out
}

// what says where the empty set of the cluster named name is. Located
// only for a warning: locating builds an index of every input, which a
// publish need not pay for.
func (e emptySet) what(name string, where func(typeURL, name string) *xdstype.Resource) string {
	if e.cla != "" {
		what := fmt.Sprintf("ClusterLoadAssignment %q", e.cla)
		if in := where(xdstype.EndpointURL, e.cla); in != nil {
			what += " (" + location(in) + ")"
		}
		return what
	}
	what := "its load_assignment"
	if in := where(xdstype.ClusterURL, name); in != nil {
		what += " (" + location(in) + ")"
	}
	return what
}

// emptyClusters is, by cluster name, the empty endpoint sets of s's
// clusters: m's when s's Clusters and endpoints are the sets m judged
// last.
func (m *EmptyEndpointsMemo) emptyClusters(s *Snapshot) map[string]emptySet {
	clusters, endpoints := s.Set(xdstype.ClusterURL), s.Set(xdstype.EndpointURL)
	if m != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.empty != nil && m.clusters == clusters && m.endpoints == endpoints {
			return m.empty
		}
	}
	empty := map[string]emptySet{}
	for _, name := range clusters.Names() {
		if e, ok := emptyEndpoints(s, name); ok {
			empty[name] = e
		}
	}
	if m != nil {
		m.clusters, m.endpoints, m.empty = clusters, endpoints, empty
	}
	return empty
}

// emptyEndpoints reports whether the cluster named name has an endpoint
// set with no endpoint in it, and where that set is. A cluster that is
// not in s, that finds its hosts another way (ORIGINAL_DST, a custom
// cluster_type such as an aggregate) or whose EDS resource is not in s is
// not judged here.
func emptyEndpoints(s *Snapshot, name string) (emptySet, bool) {
	res := s.Set(xdstype.ClusterURL).Get(name)
	if res == nil {
		return emptySet{}, false
	}
	c, ok := res.Message.(*clusterv3.Cluster)
	if !ok || c.GetClusterType() != nil {
		return emptySet{}, false
	}
	switch c.GetType() {
	case clusterv3.Cluster_EDS:
		claName := c.GetEdsClusterConfig().GetServiceName()
		if claName == "" {
			claName = name
		}
		cla := s.Set(xdstype.EndpointURL).Get(claName)
		if cla == nil {
			return emptySet{}, false
		}
		if a, _ := cla.Message.(*endpointv3.ClusterLoadAssignment); !noEndpoints(a) {
			return emptySet{}, false
		}
		return emptySet{cla: claName}, true
	case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		if !noEndpoints(c.GetLoadAssignment()) {
			return emptySet{}, false
		}
		return emptySet{}, true
	}
	return emptySet{}, false
}

// noEndpoints reports whether a holds no endpoint; a locality whose
// endpoints come from LEDS is not judged empty.
func noEndpoints(a *endpointv3.ClusterLoadAssignment) bool {
	for _, l := range a.GetEndpoints() {
		if len(l.GetLbEndpoints()) > 0 || l.GetLedsClusterLocalityConfig() != nil {
			return false
		}
	}
	return true
}
