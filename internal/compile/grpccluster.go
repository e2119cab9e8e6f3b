package compile

import (
	"fmt"
	"slices"
	"time"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/translate"
)

// MaxAggregate bounds the services of an aggregate: a client watches each.
const MaxAggregate = 16

// aggregated marks the services of gRPC aggregate services as gRPC
// services too: the aggregate's clients send them its RPCs. Aggregates do
// not nest (serviceType refuses it), so one pass is enough.
func aggregated(grpc map[string]bool, services map[string]*model.Service) {
	var members []string
	for name := range grpc {
		if s := services[name]; s != nil {
			members = append(members, s.Aggregate...)
		}
	}
	for _, m := range members {
		grpc[m] = true
	}
}

// serviceType checks a service's type and aggregate as gRPC clients read
// them (gRFC A37): a LOGICAL_DNS cluster has exactly one endpoint, and an
// aggregate names other services, not aggregates, and has no endpoints of
// its own.
func (c *checker) serviceType(s *model.Service, grpc bool) {
	const kind = "service"
	bad := func(f, format string, args ...any) { c.add(s.Source, kind, s.Name, f, format, args...) }
	oneOf(c, s.Source, kind, s.Name, "type", s.Type, translate.ServiceTypes)
	if s.Type == translate.ServiceLogicalDNS && len(s.Endpoints) != 1 {
		bad("endpoints", "%d endpoints: a logical_dns service has exactly one, the host name and port its clients resolve (gRPC clients NACK any other number)", len(s.Endpoints))
	}
	if len(s.Aggregate) == 0 {
		return
	}
	switch {
	case !grpc:
		bad("aggregate", "an aggregate service is for proxyless gRPC clients (they NACK the lb_policy CLUSTER_PROVIDED Envoy requires of it), and no grpc target sends RPCs to this service")
	case s.Type != "":
		bad("type", "an aggregate has no type of its own: its services have theirs")
	case len(s.Endpoints) > 0:
		bad("endpoints", "an aggregate has no endpoints of its own: its services have theirs")
	case s.LB != "":
		bad("lb", "an aggregate balances by the lb of the service it picks")
	case len(s.Aggregate) > MaxAggregate:
		bad("aggregate", "%d services, over the limit of %d", len(s.Aggregate), MaxAggregate)
	}
	for i, name := range s.Aggregate {
		f := fmt.Sprintf("aggregate[%d]", i)
		switch {
		case name == s.Name:
			bad(f, "%q is this service: an aggregate names other services", name)
		case slices.Index(s.Aggregate, name) < i:
			bad(f, "%q again: already aggregate[%d]", name, slices.Index(s.Aggregate, name))
		case ref(c, s.Source, kind, s.Name, f, "service", name, c.services) && len(c.services[name].Aggregate) > 0:
			bad(f, "%q is an aggregate itself: name its services here instead", name)
		}
	}
}

// weightedRoundRobin checks lb: weighted_round_robin's knobs as grpc-go
// reads them (gRFC A58): it rejects a negative penalty and raises an
// update period under 100ms to 100ms, which is said here rather than
// done silently.
func (c *checker) weightedRoundRobin(s *model.Service) {
	w := s.WRR
	if w == nil {
		return
	}
	bad := func(f, format string, args ...any) { c.add(s.Source, "service", s.Name, f, format, args...) }
	if s.LB != "weighted_round_robin" {
		bad("weighted_round_robin", "tunes lb: weighted_round_robin, and lb is %q", s.LB)
	}
	// grpc-go 1.85 reads a zero as unset and applies the default: the
	// operator who wrote 0 would get 10s of blackout or a penalty of 1.
	for f, d := range map[string]*nodegroup.Duration{"blackout_period": w.BlackoutPeriod, "weight_expiration_period": w.WeightExpirationPeriod} {
		if d != nil && *d == 0 {
			bad("weighted_round_robin."+f, "0: grpc-go reads 0 as unset and applies its default; say 1ms for next to none")
		}
	}
	if p := w.ErrorUtilizationPenalty; p != nil && (*p <= 0 || *p > 1e6) {
		bad("weighted_round_robin.error_utilization_penalty", "%g: above 0 (grpc-go reads 0 as unset, a penalty of 1) and at most 1e6", *p)
	}
	if d := w.WeightUpdatePeriod; d != nil && d.Std() < 100*time.Millisecond {
		bad("weighted_round_robin.weight_update_period", "%s: gRPC clients recompute weights at most every 100ms", d.Std())
	}
}
