package translate

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"

	"github.com/pylon-xds/pylon/internal/model"
)

// Service types: how a service's Cluster finds its endpoints.
const (
	ServiceEDS        = "eds"
	ServiceLogicalDNS = "logical_dns"
)

// ServiceTypes lists the types a service may name.
func ServiceTypes() []string { return []string{ServiceEDS, ServiceLogicalDNS} }

// HasAssignment reports whether s's endpoints are served as a
// ClusterLoadAssignment of their own: not for an aggregate (it has none)
// or a LOGICAL_DNS service (its one endpoint is inline).
func HasAssignment(s *model.Service) bool {
	return len(s.Aggregate) == 0 && s.Type != ServiceLogicalDNS
}

// discovery sets how c finds its endpoints when s is not plain EDS: a
// LOGICAL_DNS cluster with its one host in an inline load_assignment, or
// an aggregate cluster of other clusters in priority order (gRFC A37).
// The aggregate keeps lb_policy ROUND_ROBIN, as gRPC clients require (they
// NACK Envoy's CLUSTER_PROVIDED): it is a gRPC client's.
func discovery(c *clusterv3.Cluster, s *model.Service) {
	switch {
	case len(s.Aggregate) > 0:
		c.EdsClusterConfig = nil
		c.ClusterDiscoveryType = &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
			Name:        "envoy.clusters.aggregate",
			TypedConfig: pack(&aggregatev3.ClusterConfig{Clusters: s.Aggregate}),
		}}
	case s.Type == ServiceLogicalDNS:
		c.EdsClusterConfig = nil
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
		c.LoadAssignment = Endpoints(s)
	}
}
