package admin

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/pylon-xds/pylon/internal/status"
)

// Paging of /proxies. Without any of these parameters /proxies lists every
// stream, as scripts and `pylon status` read it; with any, it answers one
// page of the filtered, sorted list and how many matched, so that a page
// showing 10,000 proxies fetches fifty rows at a time.
const (
	defaultLimit = 50
	maxLimit     = 500
	maxOffset    = 1 << 20
	maxFilter    = 256
)

// pageParams are the checked paging parameters of /proxies.
type pageParams struct {
	limit, offset int
	// q is a case-insensitive substring of the node id (or the cluster
	// or identity).
	q, group, state, typ, replica string
	sort                          string
	desc                          bool
}

var pageKeys = []string{"limit", "offset", "q", "group", "state", "type", "replica", "sort"}

// sortKeys are the columns /proxies sorts by; "state" puts the worst first
// (NACKED, STALE, NOT SENT, SYNCED).
var sortKeys = map[string]bool{"node": true, "group": true, "since": true, "kind": true, "replica": true, "state": true}

// states a filter may name: the per-type states and DISCONNECTED (a
// recently closed stream).
const disconnected = "DISCONNECTED"

func validState(s string) bool {
	switch s {
	case "", status.Synced, status.Stale, status.Nacked, status.NotSent, disconnected:
		return true
	}
	return false
}

// paged reports whether r asks for a page.
func paged(r *http.Request) bool {
	q := r.URL.Query()
	for _, k := range pageKeys {
		if q.Has(k) {
			return true
		}
	}
	return false
}

// parsePage reads the paging parameters, refusing what does not parse
// rather than reading it as its zero value.
func parsePage(r *http.Request) (pageParams, error) {
	q := r.URL.Query()
	p := pageParams{limit: defaultLimit, q: q.Get("q"), group: q.Get("group"), state: q.Get("state"), typ: q.Get("type"), replica: q.Get("replica"), sort: "node"}
	var err error
	if p.limit, err = intParam(q.Get("limit"), "limit", defaultLimit, 1, maxLimit); err != nil {
		return p, err
	}
	if p.offset, err = intParam(q.Get("offset"), "offset", 0, 0, maxOffset); err != nil {
		return p, err
	}
	for _, f := range []struct{ name, v string }{{"q", p.q}, {"group", p.group}, {"type", p.typ}, {"replica", p.replica}} {
		if len(f.v) > maxFilter {
			return p, badRequest("%s: limited to %d bytes", f.name, maxFilter)
		}
	}
	if !validState(p.state) {
		return p, badRequest("state: %q is not SYNCED, STALE, NACKED, NOT SENT or DISCONNECTED", truncate(p.state))
	}
	if s := q.Get("sort"); s != "" {
		p.sort, p.desc = strings.CutPrefix(s, "-")
		if !sortKeys[p.sort] {
			return p, badRequest("sort: %q is not node, group, since, kind, replica or state (a leading - reverses)", truncate(s))
		}
	}
	return p, nil
}

func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s: %q is not a number from %d to %d", name, truncate(v), lo, hi)
	}
	return n, nil
}

// pageBody is a page of /proxies.
type pageBody struct {
	Streams []proxyEntry `json:"streams"`
	// Total counts the streams that matched, All every stream listed.
	Total   int    `json:"total"`
	All     int    `json:"all"`
	Offset  int    `json:"offset"`
	Limit   int    `json:"limit"`
	Partial string `json:"partial,omitempty"`
}

// page filters, sorts and cuts entries.
func page(entries []proxyEntry, p pageParams) pageBody {
	q := strings.ToLower(p.q)
	matched := make([]proxyEntry, 0, len(entries))
	for _, e := range entries {
		if p.match(e, q) {
			matched = append(matched, e)
		}
	}
	sort.SliceStable(matched, func(i, j int) bool { return p.less(matched[i], matched[j]) })
	b := pageBody{Streams: []proxyEntry{}, Total: len(matched), All: len(entries), Offset: p.offset, Limit: p.limit}
	if p.offset < len(matched) {
		b.Streams = matched[p.offset:min(len(matched), p.offset+p.limit)]
	}
	return b
}

func (p pageParams) match(e proxyEntry, q string) bool {
	if p.group != "" && e.Group != p.group || p.replica != "" && e.Replica != p.replica {
		return false
	}
	if q != "" && !strings.Contains(strings.ToLower(e.Node), q) && !strings.Contains(strings.ToLower(e.Cluster), q) && !strings.Contains(strings.ToLower(e.Identity), q) {
		return false
	}
	switch {
	case p.state == disconnected:
		return e.Gone != nil && (p.typ == "" || hasType(e, p.typ, ""))
	case e.Gone != nil:
		// A closed stream shows only when asked for or when nothing is
		// filtered by state.
		return p.state == "" && (p.typ == "" || hasType(e, p.typ, ""))
	case p.state != "" || p.typ != "":
		return hasType(e, p.typ, p.state)
	}
	return true
}

// hasType reports whether e has a type named typ ("": any) in state ("":
// any).
func hasType(e proxyEntry, typ, state string) bool {
	for _, t := range e.Types {
		st := t.State
		if e.Stale {
			st = Unknown // as the summary counts it
		}
		if (typ == "" || t.Type == typ) && (state == "" || st == state) {
			return true
		}
	}
	return false
}

// severity orders states worst first.
func severity(e proxyEntry) int {
	if e.Gone != nil {
		return 4
	}
	worst := 3
	for _, t := range e.Types {
		worst = min(worst, rank(t.State))
	}
	return worst
}

func rank(state string) int {
	switch state {
	case status.Nacked:
		return 0
	case status.Stale:
		return 1
	case status.NotSent:
		return 2
	}
	return 3
}

func (p pageParams) less(a, b proxyEntry) bool {
	x, y := a, b
	if p.desc {
		x, y = b, a
	}
	switch p.sort {
	case "group":
		if x.Group != y.Group {
			return x.Group < y.Group
		}
	case "since":
		if !x.Since.Equal(y.Since) {
			return x.Since.Before(y.Since)
		}
	case "kind":
		if x.Kind != y.Kind {
			return x.Kind < y.Kind
		}
	case "replica":
		if x.Replica != y.Replica {
			return x.Replica < y.Replica
		}
	case "state":
		if sx, sy := severity(x), severity(y); sx != sy {
			return sx < sy
		}
	}
	if x.Node != y.Node {
		return x.Node < y.Node
	}
	if x.Replica != y.Replica {
		return x.Replica < y.Replica
	}
	return x.ID < y.ID
}
