package protocol

import (
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// Error propagation (xRFC TP3, gRFC A88): a response may carry
// resource_errors, one per subscribed name the server cannot give the
// client. Pylon reports NOT_FOUND for an explicitly subscribed name that
// is not in what the stream may have: a name its group does not have, and
// a Secret the secret policy withholds from the stream, alike (the
// stream's snapshot lacks both, so the same words are said of both and an
// unentitled client learns nothing of which Secrets exist). A client then
// fails fast with the name instead of waiting out its does-not-exist
// timer (15 s).
//
// gRFC A88 has no client feature: a gRPC client that implements it reads
// the field whenever present. The clients Pylon is tested with (grpc-go
// v1.85, C-core 1.51, grpc-js 1.14) do not read it, and an errors-only
// response is a response more to every client subscribed to a missing
// name, so Pylon sends them only to a client that announces
// ResourceErrorsFeature.

// ResourceErrorsFeature is the client feature (Node.client_features) by
// which a client says it reads resource_errors. No well-known feature
// names it yet; this one is spelled as Envoy's xds.config.* features are.
const ResourceErrorsFeature = "xds.config.supports-resource-errors"

// MaxResourceErrors bounds the errors one response carries; names beyond
// it are the type's backlog (Told.Backlog), reported in the response that
// answers the client's ACK or NACK of this one: at the client's own pace,
// a bounded response per round trip, without waiting for a publish.
const MaxResourceErrors = 64

// grpcNotFound is google.rpc.Code NOT_FOUND (the core imports no gRPC).
const grpcNotFound = 5

// Told is which names a stream's client was told, per type, do not exist:
// each is told once per change, not on every response. A name is told
// again once it existed or left the subscription in between, or when the
// client subscribes to it afresh. Owned by the stream's loop; its size is
// bounded by the stream's subscriptions, which the server bounds.
type Told struct {
	byType map[string]map[string]struct{}
	// backlog are the types whose last errors stopped at
	// MaxResourceErrors with more names to tell.
	backlog map[string]struct{}
}

// NewTold is an empty record, for a stream whose client reads
// resource_errors.
func NewTold() *Told { return &Told{byType: map[string]map[string]struct{}{}} }

// Backlog reports whether the last errors of typeURL stopped at
// MaxResourceErrors with more to tell: the client's answer to that
// response is owed one with the next of them. False for a nil t.
func (t *Told) Backlog(typeURL string) bool {
	if t == nil {
		return false
	}
	_, more := t.backlog[typeURL]
	return more
}

// SotWErrors returns the resource_errors of the response giving the client
// o (planned, not yet built: Response clears the names just subscribed):
// the untold explicit names that the set lacks and that the client will
// not hold. Nil for a nil t.
func (w *Watch) SotWErrors(t *Told, o Outcome, set *snapshot.Set) []*discoveryv3.ResourceError {
	if t == nil {
		return nil
	}
	return t.tell(&w.TypeState, set, func(n string) bool { return o.Next[n] != nil })
}

// DeltaErrors is SotWErrors for the delta response carrying d, before it
// is recorded (SentResponse). A name the plan removes is no longer held.
// VHDS aliases are not resource names of the set: never reported.
func (w *DeltaWatch) DeltaErrors(t *Told, d *DeltaPlan, set *snapshot.Set) []*discoveryv3.ResourceError {
	if t == nil || w.VHDS != nil {
		return nil
	}
	removed := make(map[string]struct{}, len(d.Removed))
	for _, n := range d.Removed {
		removed[n] = struct{}{}
	}
	return t.tell(&w.TypeState, set, func(n string) bool {
		if _, gone := removed[n]; gone {
			return false
		}
		return w.Held[n] != nil
	})
}

// tell forgets the told names that exist again or left the subscription,
// then reports, in name order and at most MaxResourceErrors, the explicit
// names of s's subscription that set lacks and the client does not hold,
// not told before (or subscribed afresh), and records them as told. It
// records whether more were left to tell (Backlog).
func (t *Told) tell(s *TypeState, set *snapshot.Set, holds func(string) bool) []*discoveryv3.ResourceError {
	told := t.byType[s.Type.URL]
	for n := range told {
		if _, named := s.Names[n]; !named || set.Get(n) != nil {
			delete(told, n)
		}
	}
	delete(t.backlog, s.Type.URL)
	var out []*discoveryv3.ResourceError
	for _, n := range s.Sub.SortedNames() {
		if s.Sub.isGlob(n) || set.Get(n) != nil || holds(n) {
			continue
		}
		_, fresh := s.force[n]
		if _, done := told[n]; done && !fresh {
			continue
		}
		if len(out) == MaxResourceErrors {
			if t.backlog == nil {
				t.backlog = map[string]struct{}{}
			}
			t.backlog[s.Type.URL] = struct{}{}
			break
		}
		if told == nil {
			told = map[string]struct{}{}
			t.byType[s.Type.URL] = told
		}
		told[n] = struct{}{}
		out = append(out, notFound(s.Type.Kind, n))
	}
	if len(told) == 0 {
		delete(t.byType, s.Type.URL)
	}
	return out
}

// notFound is the error for a name the stream may not have. Its words are
// the same whether the name does not exist or is withheld (see above).
func notFound(kind, name string) *discoveryv3.ResourceError {
	return &discoveryv3.ResourceError{
		ResourceName: &discoveryv3.ResourceName{Name: name},
		ErrorDetail:  &rpcstatus.Status{Code: grpcNotFound, Message: fmt.Sprintf("%s %q not found", kind, name)},
	}
}
