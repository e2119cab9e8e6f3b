package xds

import (
	"slices"
	"strings"

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

// entitlement is what the stream's node may have of its group's snapshot:
// nil for the group snapshot itself, or a shared one without the Secrets
// it is denied,
// with the reason they are denied ("" when nothing is).
func (st *stream) entitlement(f *snapshot.Fleet, g *snapshot.Group) (*withheld, string) {
	if g == nil {
		return nil, ""
	}
	snap := g.Snapshot
	secrets := snap.Set(xdstype.SecretURL)
	if secrets.Len() == 0 {
		return nil, ""
	}
	if !st.ident.Verified() && !st.srv.opts.InsecureServeSecrets {
		return st.srv.withhold(snap, nil), "the connection has no verified client certificate (Secrets are served only over mTLS unless --insecure-serve-secrets)"
	}
	var denied []string
	names := st.ident.Names()
	for name := range f.SecretPolicy() {
		if secrets.Get(name) != nil && !f.SecretAllowed(name, names) {
			denied = append(denied, name)
		}
	}
	if len(denied) == 0 {
		return nil, ""
	}
	slices.Sort(denied)
	return st.srv.withhold(snap, denied), "the secret policy does not allow the client's identity (" + st.ident.String() + ")"
}

// withhold returns the shared snapshot of from less the named Secrets
// (nil: all of them).
func (s *Server) withhold(from *snapshot.Snapshot, names []string) *withheld {
	key := withheldKey{from: from, names: "*"}
	if names != nil {
		key.names = strings.Join(names, "\x00")
	}
	return s.withheldSnaps.get(key, func() *withheld {
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
	if key == st.withheldLogged {
		return
	}
	st.withheldLogged = key
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
	st.log.Warn("withholding Secrets from this stream; what names them waits", "secrets", which, "more", more, "reason", why)
}
