package replicas_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// proxyRow is one stream of a replica's fleet-wide /proxies.
type proxyRow struct {
	Replica string            `json:"replica"`
	Node    string            `json:"node"`
	Gone    any               `json:"disconnectedAt"`
	Types   []proxyTypeStatus `json:"types"`
}

type proxyTypeStatus struct {
	Type  string `json:"type"`
	State string `json:"state"`
}

// proxies is r's /proxies: the open streams of the whole fleet (a
// replica's recently closed streams are left out), and its partial note.
func (r *replica) proxies() ([]proxyRow, string) {
	r.f.t.Helper()
	var body struct {
		Streams []proxyRow `json:"streams"`
		Partial string     `json:"partial"`
	}
	r.getJSON("/proxies", &body)
	var open []proxyRow
	for _, s := range body.Streams {
		if s.Gone == nil {
			open = append(open, s)
		}
	}
	return open, body.Partial
}

// xdsTypes are the types every proxy of these tests holds.
func xdsTypes() []string { return []string{"CDS", "EDS", "LDS", "RDS"} }

// rowText is "node@replica CDS:SYNCED EDS:SYNCED ...", the types in
// xdsTypes order.
func (p proxyRow) text() string {
	states := map[string]string{}
	for _, ty := range p.Types {
		states[ty.Type] = ty.State
	}
	parts := []string{p.Node + "@" + p.Replica}
	for _, typ := range xdsTypes() {
		parts = append(parts, typ+":"+orElse(states[typ], "-"))
	}
	return strings.Join(parts, " ")
}

// syncedText is what a row of node served by replica reads when every type
// is SYNCED.
func syncedText(node, replica string) string {
	parts := []string{node + "@" + replica}
	for _, typ := range xdsTypes() {
		parts = append(parts, typ+":SYNCED")
	}
	return strings.Join(parts, " ")
}

// nodeRows is what r's /proxies says of the given nodes, one row text per
// open stream, sorted; with servedBy set, only of the streams that replica
// serves.
func (r *replica) nodeRows(servedBy string, nodes ...string) string {
	r.f.t.Helper()
	rows, _ := r.proxies()
	var out []string
	for _, p := range rows {
		if slices.Contains(nodes, p.Node) && (servedBy == "" || p.Replica == servedBy) {
			out = append(out, p.text())
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// allSynced is the nodeRows text of nodes each SYNCED on replica.
func allSynced(replica string, nodes ...string) string {
	var out []string
	for _, n := range nodes {
		out = append(out, syncedText(n, replica))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// waitRows waits until r's /proxies rows for nodes (served by servedBy,
// when set) read want.
func waitRows(r *replica, servedBy, want string, nodes ...string) {
	t := r.f.t
	t.Helper()
	var got string
	waitShow(t, fmt.Sprintf("/proxies on %s reading\n%s", r.id, want), func() bool {
		got = r.nodeRows(servedBy, nodes...)
		return got == want
	}, func() string { return "it reads:\n" + got })
}
