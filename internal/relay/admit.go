package relay

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/status"
)

// Admit takes a downstream stream of node n into its key: the key's
// upstream stream starts with its first proxy. The xDS server calls it
// (xds.Options.Admit) once it accepted the node, its certificate's
// identity among the rest: a claim it refuses never makes the relay fetch
// anything with its own identity, nor takes a key. It refuses a node the
// template makes no key of (FAILED_PRECONDITION) and a new key past
// MaxKeys (RESOURCE_EXHAUSTED). release ends the stream's use of the key.
//
// The stream is served once its key's group is in the relay's fleet, as
// Pylon serves a stream whose group is there from the start: Admit waits
// for it, up to firstConfigWait (the key's upstream stream answers, the
// relay builds, waiting up to Settle for what the config names, and
// publishes). A stream that joined before its group
// would not be answered for a type its group's config lacks (no
// clusters, say) until that type changed, and Envoy waits for its first
// clusters' answer before it starts. Past the wait (the upstream away,
// nothing kept), the stream waits in no group, getting nothing, until
// the key's config comes.
//
// subscribed is the stream's hook for what it asks for of the types
// subscribed by name (asked.go): the xDS server tells it.
func (r *Relay) Admit(ctx context.Context, n nodegroup.Node) (release func(), subscribed func(typeURL string, wildcard bool, names []string), err error) {
	release, m, ready, err := r.admit(n)
	if err != nil {
		return nil, nil, err
	}
	t := time.NewTimer(firstConfigWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
		// The client left or the server is stopping: nothing to serve.
		release()
		return nil, nil, ctx.Err()
	}
	return release, r.subscribedFor(ctx, m), nil
}

// firstConfigWait bounds how long Admit waits for a new key's first
// config: past Settle and an upstream's answer; a stream whose client
// leaves, or a server stopping, ends the wait at once.
const firstConfigWait = 2 * time.Second

// admit is Admit but for the wait: ready is closed once the key's group
// is in the relay's fleet; m is the stream as its key counts it.
func (r *Relay) admit(n nodegroup.Node) (release func(), m *member, ready <-chan struct{}, err error) {
	if r.o.Groups != nil {
		if _, ok := r.o.Groups.Current(); !ok {
			return nil, nil, nil, grpcstatus.Errorf(codes.Unavailable, "the relay has not read its upstream's group rules yet (%s): retry", r.o.Groups.URL)
		}
	}
	k, err := r.keyOf(n)
	if err != nil {
		return nil, nil, nil, grpcstatus.Error(codes.FailedPrecondition, err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil || r.ctx.Err() != nil {
		return nil, nil, nil, grpcstatus.Error(codes.Unavailable, "the relay is not serving")
	}
	ks := r.keys[k.Name]
	if ks != nil && r.o.Groups == nil && !maps.Equal(ks.key.Values, k.Values) {
		// Escaped names keep different values apart (Template.escape);
		// this holds it should a template ever let two meet.
		return nil, nil, nil, grpcstatus.Errorf(codes.FailedPrecondition, "node %q: key %q is held for other field values", n.ID, k.Name)
	}
	if ks != nil && ks.stale {
		// Renewed, its builds may still end while the new key's begin;
		// the new key's own file write comes after its stream's first
		// answer.
		rules, _ := r.o.Groups.Current()
		ks = r.revive(ks, k, rules)
	}
	if ks == nil {
		if len(r.keys) >= r.o.MaxKeys {
			return nil, nil, nil, grpcstatus.Errorf(codes.ResourceExhausted, "the relay serves at most %d keys (--max-keys) and holds as many; node %q would add key %q", r.o.MaxKeys, n.ID, k.Name)
		}
		ks = r.newKey(k, nil)
		r.goKey(ks)
		r.o.Logger.Info("relay key added: its upstream stream starts", "key", k.Name, "node", n.ID)
	}
	ks.streams++
	m = &member{}
	if r.o.Groups != nil {
		m.node = n
	}
	ks.addMember(m)
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			// m.ks, not ks: a change of the group rules may have moved
			// the stream to another key since.
			m.ks.dropMember(m)
		})
	}, m, ks.shown, nil
}

// Observe reports a downstream NACK upstream, on the stream of the
// proxy's key (upstream.Client.ReportNACK: once per upstream version).
func (r *Relay) Observe(e *status.Event) {
	if e.Kind != status.RequestNACK || e.Member == nil {
		return
	}
	k, err := r.keyOf(*e.Member)
	if err != nil {
		return
	}
	r.mu.Lock()
	ks := r.keys[k.Name]
	r.mu.Unlock()
	if ks == nil {
		return
	}
	detail := fmt.Sprintf("downstream proxy %q (through relay %s): %s", e.NodeID(), r.o.ID, e.Detail)
	if ks.client.ReportNACK(e.TypeURL, detail) {
		r.nacks.Add(1)
		r.o.Logger.Info("relay: a downstream NACK reported upstream", "key", k.Name, "node", e.NodeID(), "type", e.TypeURL)
	}
}

// Wants says the relay wants none of the per-change events: a NACK is
// always reported (status.Selective).
func (r *Relay) Wants(status.EventKind) bool { return false }
