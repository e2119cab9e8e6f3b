package fleet

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// NodeOf is what group rules and rollout stages match on in n: Envoy's
// node as nodegroup sees it, without identities, which only the connection
// proves.
func NodeOf(n *corev3.Node) nodegroup.Node {
	out := nodegroup.Node{
		ID:      n.GetId(),
		Cluster: n.GetCluster(),
		Region:  n.GetLocality().GetRegion(),
		Zone:    n.GetLocality().GetZone(),
		SubZone: n.GetLocality().GetSubZone(),
	}
	if fields := n.GetMetadata().GetFields(); len(fields) > 0 {
		out.Metadata = make(map[string]string, len(fields))
		for k, v := range fields {
			if sv := v.GetStringValue(); sv != "" {
				out.Metadata[k] = sv
			}
		}
	}
	return out
}
