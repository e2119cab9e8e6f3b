package xds

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Secrets go only to streams entitled to them: the connection has a
// verified client certificate (or the operator opted into serving Secrets
// without one, Options.InsecureServeSecrets), and the fleet's secret
// policy allows the certificate's identity. A Secret a stream may not have
// is, for that stream, as if it did not exist: the stream serves a
// snapshot without it. That snapshot is built once per group snapshot and
// set of withheld names, and shared by every stream with the same
// entitlement, so their planning stays shared (canons are per set); a
// stream that is denied nothing serves the group's snapshot itself.

// withheld is a group snapshot less the Secrets some streams may not have.
type withheld struct {
	snap  *snapshot.Snapshot
	names []string // the withheld Secrets, sorted; nil: every Secret
}

type withheldKey struct {
	from *snapshot.Snapshot
	// names are the withheld Secrets joined by NUL; "*" for all.
	names string
}

// entitled is what streams of one identity may have of one group snapshot
// under one fleet's secret policy: w is nil when they may have it all,
// why says why something is withheld. Shared through Server.entitlements
// and kept alive by the streams holding it.
type entitled struct {
	w   *withheld
	why string
}

type entitledKey struct {
	// fleet is there for its secret policy, which a publish may change
	// while a group's snapshot stays.
	fleet *fleet.Fleet
	from  *snapshot.Snapshot
	// ident is identityKey of the stream's identity.
	ident string
}

// entitlement is what the stream's node may have of its group's snapshot
// (nil: no group, or a group without Secrets). It is worked out once per
// fleet, group snapshot and identity, not per stream: at ten thousand
// streams a publish would otherwise walk the secret policy ten thousand
// times.
func (st *stream) entitlement(f *fleet.Fleet, g *fleet.Group) *entitled {
	if g == nil || g.Snapshot.Set(xdstype.SecretURL).Len() == 0 {
		return nil
	}
	key := entitledKey{fleet: f, from: g.Snapshot, ident: identityKey(st.ident)}
	return st.srv.entitlements.Get(key, func() *entitled { return st.entitle(f, g.Snapshot) })
}

// entitle works out entitlement: the shared snapshot less the Secrets the
// stream's identity is denied, and why.
func (st *stream) entitle(f *fleet.Fleet, snap *snapshot.Snapshot) *entitled {
	if !st.ident.Verified() && !st.srv.opts.InsecureServeSecrets {
		return &entitled{w: st.srv.withhold(snap, nil), why: "the connection has no verified client certificate (Secrets are served only over mTLS unless --insecure-serve-secrets)"}
	}
	secrets := snap.Set(xdstype.SecretURL)
	var denied []string
	names := st.ident.Names()
	// The snapshot's own policy and the fleet's: a staged rollout's
	// previous snapshot holds Secrets the fleet's policy may not name.
	for name := range snap.SecretPolicy() {
		if !f.SecretAllowed(snap, name, names) {
			denied = append(denied, name)
		}
	}
	for name := range f.SecretPolicy() {
		if _, seen := snap.SecretPolicy()[name]; !seen && secrets.Get(name) != nil && !f.SecretAllowed(snap, name, names) {
			denied = append(denied, name)
		}
	}
	if len(denied) == 0 {
		return &entitled{}
	}
	slices.Sort(denied)
	return &entitled{w: st.srv.withhold(snap, denied), why: "the secret policy does not allow the client's identity (" + st.ident.String() + ")"}
}

// identityKey spells everything a verified identity proves (every name,
// not the shortened text of Identity.String, which two certificates can
// share), each part length-prefixed so that no choice of names can spell
// another's; "u" without a verified certificate.
func identityKey(ident identity.Identity) string {
	if !ident.Verified() {
		return "u"
	}
	var b strings.Builder
	b.WriteString("v")
	for _, n := range append([]string{ident.SPIFFE}, ident.DNS...) {
		fmt.Fprintf(&b, "%d:%s", len(n), n)
	}
	return b.String()
}

// withhold returns the shared snapshot of from less the named Secrets
// (nil: all of them).
func (s *Server) withhold(from *snapshot.Snapshot, names []string) *withheld {
	key := withheldKey{from: from, names: "*"}
	if names != nil {
		key.names = strings.Join(names, "\x00")
	}
	return s.withheldSnaps.Get(key, func() *withheld {
		// Only the Secret set is rebuilt: every other set is the group's
		// own, so the planning shared per set (canons, transitions) is
		// shared with the streams that get every Secret.
		return &withheld{snap: snapshot.Without(from, xdstype.SecretURL, names), names: names}
	})
}

// logWithheld says once per stream and change which Secrets the stream
// does not get, and why: the answer to "why does this listener not warm?".
func (st *stream) logWithheld(w *withheld, why string) {
	key := ""
	if w != nil && why != "" {
		key = why + "\x00" + strings.Join(w.names, "\x00")
	}
	// The stream keeps the key's hash, not the key: a word of every
	// stream rather than two (a collision would only skip a log line).
	var sum uint64
	if key != "" {
		h := fnv.New64a()
		h.Write([]byte(key))
		sum = h.Sum64() | 1
	}
	if sum == st.withheldLogged {
		return
	}
	st.withheldLogged = sum
	if key == "" || !st.srv.logged.first(onceKey("withheld", st.node.GetId(), key)) {
		return
	}
	shown := w.names
	more := 0
	if len(shown) > 5 {
		shown, more = shown[:5], len(shown)-5
	}
	which := "every Secret"
	if w.names != nil {
		which = strings.Join(shown, ", ")
	}
	st.log().Warn("withholding Secrets from this stream; what names them waits", "secrets", which, "more", more, "reason", why)
}
