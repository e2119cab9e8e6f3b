package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/token"
)

// Bounds of the relays' reports (POST /v1/relays/{relay}).
const (
	maxRelays          = 1000
	maxRelayBody       = 256 << 10
	maxRelayKeys       = 2000
	maxRelayText       = 256
	RelayReportExpires = 60 * time.Second
)

// RelayKey is one key of a relay's report: its downstream proxies'
// counts, never their names. The replicas publish it as it is.
type RelayKey = fleetstatus.RelayKey

// RelayReport is a relay's downstream status as the upstream shows it in
// /proxies: what the relay said (with the token it holds: a report, not
// a proof) and when; Identity is what its verified client certificate
// proves, when the admin API verifies one. Replica is the replica the
// relay reports to; with replicas on etcd, another replica's reports are
// listed too, Stale as its proxies are while etcd cannot be read.
type RelayReport struct {
	Relay      string     `json:"relay"`
	Identity   string     `json:"identity,omitempty"`
	Replica    string     `json:"replica,omitempty"`
	Stale      bool       `json:"stale,omitempty"`
	ReportedAt time.Time  `json:"reportedAt"`
	Keys       []RelayKey `json:"keys"`
}

// RelayReports holds the relays' last reports, each until it expires.
// The daemon makes one to pass both to Handler (Options.RelayReports) and
// to fleet status, which publishes them to the other replicas.
type RelayReports struct {
	mu sync.Mutex
	m  map[string]RelayReport
}

// NewRelayReports returns an empty RelayReports.
func NewRelayReports() *RelayReports { return &RelayReports{m: map[string]RelayReport{}} }

// Published is the reports not expired, as fleet status publishes them.
func (rr *RelayReports) Published() []fleetstatus.Relay {
	var out []fleetstatus.Relay
	for _, r := range rr.list() {
		out = append(out, fleetstatus.Relay{Relay: r.Relay, Identity: r.Identity, ReportedAt: r.ReportedAt, Keys: r.Keys})
	}
	return out
}

// list is the reports not expired, by relay.
func (rr *RelayReports) list() []RelayReport {
	if rr == nil {
		return nil
	}
	now := time.Now()
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var out []RelayReport
	for id, r := range rr.m {
		if now.Sub(r.ReportedAt) > RelayReportExpires {
			delete(rr.m, id)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b RelayReport) int { return strings.Compare(a.Relay, b.Relay) })
	return out
}

// registerRelays adds POST /v1/relays/{relay}: a relay's summary of its
// downstream proxies, per key (docs/relay.md), with the relay token or
// the write token (guard.relay). A report names no node, decides nothing
// (no balance, no rollout halt), is shown apart from the proxies this
// server serves, under the relay's name, and expires unless renewed; it
// is bounded in size, keys and relays.
func registerRelays(mux *http.ServeMux, g guard, rr *RelayReports) {
	mux.HandleFunc("POST /v1/relays/{relay}", g.relay(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("relay")
		if id == "" || len(id) > maxRelayText || !utf8.ValidString(id) {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("relay id: 1 to %d bytes of UTF-8", maxRelayText)})
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxRelayBody+1))
		if err != nil || len(b) > maxRelayBody {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("a relay's report is at most %d bytes", maxRelayBody)})
			return
		}
		var body struct {
			Keys []RelayKey `json:"keys"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "a relay's report: " + truncate(err.Error())})
			return
		}
		if len(body.Keys) > maxRelayKeys {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("a relay's report: %d keys; at most %d", len(body.Keys), maxRelayKeys)})
			return
		}
		rep := RelayReport{Relay: cutText(id), ReportedAt: time.Now().UTC(), Keys: make([]RelayKey, 0, len(body.Keys))}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && len(r.TLS.VerifiedChains) > 0 {
			if c := r.TLS.PeerCertificates[0]; len(c.URIs) > 0 {
				rep.Identity = cutText(c.URIs[0].String())
			}
		}
		for _, k := range body.Keys {
			if k.Proxies < 0 || k.ACKed < 0 || k.NACKed < 0 || k.Pending < 0 {
				writeJSON(w, http.StatusBadRequest, apiError{Error: "a relay's report: negative counts"})
				return
			}
			k.Key, k.Version = cutText(k.Key), cutText(k.Version)
			rep.Keys = append(rep.Keys, k)
		}
		if !rr.put(rep) {
			writeJSON(w, http.StatusTooManyRequests, apiError{Error: fmt.Sprintf("reports of %d relays are held, the bound: this one is not", maxRelays)})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
}

// relay lets a relay's report through with the relay token or the write
// token, never the read token: whoever reads the status must not be able
// to post, or overwrite, what a relay says of its proxies.
func (g guard) relay(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := bearer(r)
		// All compared, always: the time taken says nothing of which.
		tok := g.tokens()
		okRelay := g.o.RelayToken != "" && token.Equal(got, g.o.RelayToken)
		okRead, okWrite := token.Equal(got, tok.Read), token.Equal(got, tok.Write)
		need := "relays' reports need Authorization: Bearer <relay token> (" + where(g.o.RelayTokenFile, "relay-token") + ") or the write token (" + where(g.o.TokenFile, "admin-token") + ")"
		if g.o.RelayToken == "" {
			need = "relays' reports need Authorization: Bearer <write token> (" + where(g.o.TokenFile, "admin-token") + "), or a relay token (serve --relay-token-file)"
		}
		switch {
		case okRelay || okWrite:
			h(w, r)
		case okRead:
			g.fails.refused(r, reasonReadForWrite)
			g.refuse(w, opening(reasonReadForWrite)+"the read token does not authorise writes, a relay's report among them: "+need)
		default:
			reason := failed(got)
			g.fails.refused(r, reason)
			g.refuse(w, opening(reason)+need)
		}
	}
}

// put keeps rep, unless maxRelays others are held: expired ones are let
// go first, so that relays gone for good do not keep new ones out until
// someone reads the list.
func (rr *RelayReports) put(rep RelayReport) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if _, ok := rr.m[rep.Relay]; !ok && len(rr.m) >= maxRelays {
		now := time.Now()
		for id, r := range rr.m {
			if now.Sub(r.ReportedAt) > RelayReportExpires {
				delete(rr.m, id)
			}
		}
	}
	if _, ok := rr.m[rep.Relay]; !ok && len(rr.m) >= maxRelays {
		return false
	}
	rr.m[rep.Relay] = rep
	return true
}

// cutText bounds a relay-supplied text, redacted, at a rune boundary.
func cutText(s string) string {
	s = redact.String(s)
	if len(s) <= maxRelayText {
		return s
	}
	s = s[:maxRelayText]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// relaysOf lists the relays' reports: those posted here, under this
// replica, and, with replicas on etcd, those posted to the others (their
// summaries carry them), under theirs, scrubbed again as their proxies
// are: etcd is shared.
func (o Options) relaysOf() []RelayReport {
	out := o.relays.list()
	for i := range out {
		out[i].Replica = o.Identifier
	}
	if o.Fleet == nil {
		return out
	}
	for _, r := range o.Fleet.Relays() {
		rep := RelayReport{Relay: cutText(r.Relay.Relay), Identity: cutText(r.Identity), Replica: cutText(r.Replica), Stale: r.Stale, ReportedAt: r.ReportedAt, Keys: make([]RelayKey, 0, len(r.Keys))}
		for _, k := range r.Keys {
			k.Key, k.Version = cutText(k.Key), cutText(k.Version)
			rep.Keys = append(rep.Keys, k)
		}
		out = append(out, rep)
	}
	return out
}
