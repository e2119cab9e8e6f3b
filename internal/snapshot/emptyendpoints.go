package snapshot

import (
	"fmt"
	"strings"

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
	var out diag.List
	for _, url := range []string{xdstype.ListenerURL, xdstype.RouteURL, xdstype.VirtualHostURL} {
		set := s.Set(url)
		for _, name := range set.Names() {
			r := set.Get(name)
			for _, ref := range r.Refs {
				if ref.TypeURL != xdstype.ClusterURL || strings.Contains(ref.Field, "request_mirror_policies") {
					continue
				}
				empty, what := emptyEndpoints(s, ref.Name, where)
				if !empty {
					continue
				}
				d := diag.Diagnostic{Type: set.Type().Kind, Name: name, Field: ref.Field, Message: fmt.Sprintf(
					"sends traffic to Cluster %q, whose endpoint set is empty (%s): Envoy answers 503, no healthy upstream, until endpoints are added", ref.Name, what)}
				if in := where(url, name); in != nil {
					d.File, d.Line = in.File, in.Line
				}
				out = append(out, d)
			}
		}
	}
	return out
}

// emptyEndpoints reports whether the cluster named name has an endpoint
// set with no endpoint in it, and says where that set is. A cluster that
// is not in s, that finds its hosts another way (ORIGINAL_DST, a custom
// cluster_type such as an aggregate) or whose EDS resource is not in s
// is not judged here.
func emptyEndpoints(s *Snapshot, name string, where func(typeURL, name string) *xdstype.Resource) (bool, string) {
	res := s.Set(xdstype.ClusterURL).Get(name)
	if res == nil {
		return false, ""
	}
	c, ok := res.Message.(*clusterv3.Cluster)
	if !ok || c.GetClusterType() != nil {
		return false, ""
	}
	switch c.GetType() {
	case clusterv3.Cluster_EDS:
		claName := c.GetEdsClusterConfig().GetServiceName()
		if claName == "" {
			claName = name
		}
		cla := s.Set(xdstype.EndpointURL).Get(claName)
		if cla == nil {
			return false, ""
		}
		// Where the set is, only for a warning: locating builds an
		// index of every input, which a publish need not pay for.
		if a, _ := cla.Message.(*endpointv3.ClusterLoadAssignment); !noEndpoints(a) {
			return false, ""
		}
		what := fmt.Sprintf("ClusterLoadAssignment %q", claName)
		if in := where(xdstype.EndpointURL, claName); in != nil {
			what += " (" + location(in) + ")"
		}
		return true, what
	case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		if !noEndpoints(c.GetLoadAssignment()) {
			return false, ""
		}
		what := "its load_assignment"
		if in := where(xdstype.ClusterURL, name); in != nil {
			what += " (" + location(in) + ")"
		}
		return true, what
	}
	return false, ""
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
