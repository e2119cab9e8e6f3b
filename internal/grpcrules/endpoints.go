package grpcrules

import (
	"fmt"
	"math"
	"slices"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// endpoints checks a ClusterLoadAssignment as gRPC clients read it (gRFC
// A27): every locality group has a locality and a weight, one locality
// appears once per priority, priorities run from 0 without a gap, and an
// address appears once.
func (c *checker) endpoints(a *endpointv3.ClusterLoadAssignment) {
	seen := map[string]string{}
	localities := map[uint32]map[string]bool{}
	weights := map[uint32]uint64{}
	for i, group := range a.GetEndpoints() {
		field := fmt.Sprintf("endpoints[%d]", i)
		l := group.GetLocality()
		if l == nil {
			c.add("endpoints-locality", nil, field+".locality", "missing: gRPC clients need each group's locality (it may be empty: {})")
			continue
		}
		if group.GetLoadBalancingWeight().GetValue() == 0 {
			c.add("endpoints-locality-weight", nil, field+".load_balancing_weight", "missing: gRPC clients drop a locality without a weight, and with it these endpoints")
			continue
		}
		p := group.GetPriority()
		if weights[p] += uint64(group.GetLoadBalancingWeight().GetValue()); weights[p] > math.MaxUint32 {
			c.add("endpoints-locality", nil, field+".load_balancing_weight", "the weights of priority %d's localities sum past %d", p, uint64(math.MaxUint32))
		}
		id := fmt.Sprintf("{region=%q, zone=%q, sub_zone=%q}", l.GetRegion(), l.GetZone(), l.GetSubZone())
		if localities[p] == nil {
			localities[p] = map[string]bool{}
		}
		if localities[p][id] {
			c.add("endpoints-locality", nil, field+".locality", "locality %s is already a group of priority %d", id, p)
		}
		localities[p][id] = true
		for j, e := range group.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			addr := fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue())
			ef := fmt.Sprintf("%s.lb_endpoints[%d]", field, j)
			if prev, dup := seen[addr]; dup {
				c.add("endpoints-duplicate", nil, ef, "%s is already %s", addr, prev)
				continue
			}
			seen[addr] = ef
		}
	}
	priorities := make([]uint32, 0, len(localities))
	for p := range localities {
		priorities = append(priorities, p)
	}
	slices.Sort(priorities)
	for i, p := range priorities {
		if p != uint32(i) {
			c.add("endpoints-priorities", nil, "endpoints", "priority %d is missing (priorities %v): gRPC clients need them from 0 without a gap", i, priorities)
			break
		}
	}
}
