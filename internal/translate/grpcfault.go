package translate

import (
	"time"

	commonfaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/model"
)

// FaultFilter is the name of the fault filter in a gRPC target's HTTP
// connection manager, and the key of its per-route config.
const FaultFilter = "envoy.filters.http.fault"

// GRPCStatusCodes are the gRPC status codes by the names a config writes
// (lowercase, words joined by -), for faults.
var GRPCStatusCodes = map[string]uint32{
	"cancelled": 1, "unknown": 2, "invalid-argument": 3, "deadline-exceeded": 4,
	"not-found": 5, "already-exists": 6, "permission-denied": 7, "resource-exhausted": 8,
	"failed-precondition": 9, "aborted": 10, "out-of-range": 11, "unimplemented": 12,
	"internal": 13, "unavailable": 14, "data-loss": 15, "unauthenticated": 16,
}

// hasFault reports whether a target or any of its routes injects faults:
// only then does its listener carry the fault filter.
func hasFault(g *model.GRPCTarget) bool {
	if g.Fault != nil {
		return true
	}
	for i := range g.Routes {
		if g.Routes[i].Fault != nil {
			return true
		}
	}
	return false
}

// faultFilter is the fault filter with no fault of its own: each route
// says its own (gRFC A33: clients read the per-route override).
func faultFilter() *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: FaultFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(&faultv3.HTTPFault{})}}
}

// grpcFaultConfig is a route's fault as its typed_per_filter_config, nil
// for none. A percent unset is every RPC.
func grpcFaultConfig(f *model.GRPCFault) map[string]*anypb.Any {
	if f == nil {
		return nil
	}
	out := &faultv3.HTTPFault{}
	if d := f.Delay; d != nil {
		// A missing delay is refused by the model's checks; the
		// translation runs all the same, so it must not panic on one.
		var delay time.Duration
		if d.Delay != nil {
			delay = d.Delay.Std()
		}
		out.Delay = &commonfaultv3.FaultDelay{
			FaultDelaySecifier: &commonfaultv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(delay)},
			Percentage:         percent(d.Percent),
		}
	}
	if a := f.Abort; a != nil {
		out.Abort = &faultv3.FaultAbort{
			ErrorType:  &faultv3.FaultAbort_GrpcStatus{GrpcStatus: GRPCStatusCodes[a.Status]},
			Percentage: percent(a.Percent),
		}
	}
	return map[string]*anypb.Any{FaultFilter: pack(out)}
}

func percent(p *uint32) *typev3.FractionalPercent {
	v := uint32(100)
	if p != nil {
		v = *p
	}
	return &typev3.FractionalPercent{Numerator: v, Denominator: typev3.FractionalPercent_HUNDRED}
}

// faultOr returns the first non-nil fault.
func faultOr(a, b *model.GRPCFault) *model.GRPCFault {
	if a != nil {
		return a
	}
	return b
}
