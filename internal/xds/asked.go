package xds

import (
	"maps"
	"slices"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/xds/protocol"
)

// A relay fetches what its proxies ask for: Options.Admit's subscribed is
// told each stream's subscription to the per-resource types before a
// request that changes it is applied, so that the relay can subscribe
// upstream and wait (bounded) for what it did not hold; the request is
// then answered from the fleet current after, as Pylon answers a request
// for what its config has. Streams of a server without the hook (serve)
// compute nothing of it.

// asking is the state-of-the-world half: the request's names are the
// whole subscription. A stale request changes nothing (X14), nor does a
// full-state type's.
func (st *sotwStream) asking(w *sotwEntry, req *discoveryv3.DiscoveryRequest) error {
	hook := st.reg.subscribed
	if hook == nil || w.Type.FullState || w.Sent && req.GetResponseNonce() != w.Nonce {
		return nil
	}
	if w.Repeats(req.GetResourceNames()) {
		// An ACK repeating the subscription, as nearly every request is:
		// the set and sort below were a third of a relay's CPU under
		// EDS churn.
		return nil
	}
	wildcard, names := askedNames(req.GetResourceNames(), nil, nil)
	if sameSubscription(w.Sub, wildcard, names) {
		return nil
	}
	return st.ask(hook, w.Type.URL, wildcard, names, st.onFleet)
}

// asking is the delta half: the subscription the request makes of the
// stream's and the request's changes. One past the bound on names is
// refused once applied (checkNames): not told.
func (st *deltaStream) asking(w *deltaEntry, req *discoveryv3.DeltaDiscoveryRequest) error {
	hook := st.reg.subscribed
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if hook == nil || w.Type.FullState || w.Started && len(subscribe)+len(unsubscribe) == 0 {
		return nil
	}
	var had []string
	wildcard := false
	if w.Started {
		had, wildcard = w.Sub.SortedNames(), w.Wildcard
	}
	wild, names := askedNames(append(slices.Clip(had), subscribe...), unsubscribe, &wildcard)
	if len(names) > st.srv.opts.MaxResourceNames {
		return nil
	}
	if w.Started && sameSubscription(w.Sub, wild, names) {
		return nil
	}
	return st.ask(hook, w.Type.URL, wild, names, st.onFleet)
}

// askedNames are names less unsubscribe, sorted and without "*", and
// whether they ask for everything: "*" among names, or *was (delta's
// wildcard so far) unless unsubscribe has "*".
func askedNames(names, unsubscribe []string, was *bool) (wildcard bool, out []string) {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	wildcard = was != nil && *was
	if _, ok := set["*"]; ok {
		wildcard = true
		delete(set, "*")
	}
	for _, n := range unsubscribe {
		if n == "*" {
			wildcard = false
		}
		delete(set, n)
	}
	return wildcard, slices.Sorted(maps.Keys(set))
}

// sameSubscription reports whether sub (nil: none yet) is wildcard and
// names.
func sameSubscription(sub *protocol.Subscription, wildcard bool, names []string) bool {
	if sub == nil {
		return !wildcard && len(names) == 0
	}
	return sub.Wildcard == wildcard && slices.Equal(sub.SortedNames(), names)
}

// ask tells hook, then serves from the fleet current after it: a publish
// meanwhile (what the hook fetched) is pushed first, as request does, so
// that the answer to the request never overtakes it.
func (st *stream) ask(hook Subscribed, typeURL string, wildcard bool, names []string, onFleet func() error) error {
	hook(typeURL, wildcard, names)
	prev := st.fleet
	st.useFleet(st.srv.opts.Fleets.Current())
	if st.fleet == prev {
		return nil
	}
	if err := st.checkShard(); err != nil {
		return err
	}
	return onFleet()
}
