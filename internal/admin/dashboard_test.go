package admin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/status/statustest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// trackerFleet is a real status tracker fed events for n streams: node
// "n<i>" (zero-padded), group a for even i and b for odd, CDS SYNCED,
// except every tenth NACKED and every seventh STALE; stream 0 is closed.
func trackerFleet(n int) *status.Tracker {
	tr := status.NewTracker(status.Options{Expected: func(string, string) string { return "v1" }, Abbrev: func(string) string { return "CDS" }})
	fd := statustest.New(tr)
	t0 := time.Now().Add(-time.Minute)
	for i := range n {
		id, info := uint64(i), status.Info{Node: fmt.Sprintf("n%04d", i), Kind: "ADS"}
		fd.Seen(id, info, map[bool]string{true: "a", false: "b"}[i%2 == 0], t0.Add(time.Duration(i)*time.Millisecond))
		fd.Sent(id, info, xdstype.ClusterURL, status.Stamp{Version: "v1", At: t0}, 0, nil, nil)
		switch {
		case i%10 == 3:
			tr.NACKed(id, info, xdstype.ClusterURL, status.NACK{Version: "v1", Detail: "bad", At: t0.Add(time.Second)})
		case i%7 == 5:
		default:
			fd.ACKed(id, info, xdstype.ClusterURL, status.Stamp{Version: "v1", At: t0.Add(time.Second)})
		}
	}
	tr.Closed(0, time.Now())
	return tr
}

// dashHarness is the admin handler over a real tracker.
func dashHarness(t *testing.T, tr *status.Tracker, o Options) *harness {
	t.Helper()
	h := newHarness(t, o, nil)
	o.Pipeline, o.Proxies, o.Fleets, o.Registry = h.src, tr, h.src, xdstype.New()
	o.Config = nil
	srv := httptest.NewServer(handler(o, newLimiter(maxInFlight, busyWait)))
	t.Cleanup(srv.Close)
	h.srv = srv
	return h
}

func nodes(entries []proxyEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Node
	}
	return out
}

// /proxies pages: filter by text, group, state and type, sort by any
// column either way, bounded limits; without parameters the whole list.
func TestProxiesPaging(t *testing.T) {
	h := dashHarness(t, trackerFleet(120), Options{Token: writeTok})
	get := func(q string) pageBody {
		t.Helper()
		code, body := h.do(t, "GET", "/proxies?"+q, writeTok, nil)
		if code != http.StatusOK {
			t.Fatalf("/proxies?%s: %d %s", q, code, body)
		}
		var b pageBody
		decode(t, body, &b)
		return b
	}
	b := get("limit=3&offset=10")
	if want := []string{"n0010", "n0011", "n0012"}; !slices.Equal(nodes(b.Streams), want) || b.Total != 120 || b.All != 120 {
		t.Errorf("page 10+3: %v of %d/%d, want %v of 120", nodes(b.Streams), b.Total, b.All, want)
	}
	if b := get("sort=-node&limit=2"); !slices.Equal(nodes(b.Streams), []string{"n0119", "n0118"}) {
		t.Errorf("sort=-node: %v", nodes(b.Streams))
	}
	// 12 NACKED (i%10==3), the first ones first when sorted by state.
	if b := get("state=NACKED&limit=500"); b.Total != 12 || b.Streams[0].Node != "n0003" {
		t.Errorf("state=NACKED: %d, first %v", b.Total, nodes(b.Streams))
	}
	if b := get("sort=state&limit=12"); !slices.ContainsFunc(b.Streams, func(e proxyEntry) bool { return e.Node == "n0113" }) || b.Streams[11].Node != "n0113" {
		t.Errorf("sort=state does not put the 12 NACKED first: %v", nodes(b.Streams))
	}
	if b := get("q=N011&group=b"); !slices.Equal(nodes(b.Streams), []string{"n0111", "n0113", "n0115", "n0117", "n0119"}) {
		t.Errorf("q=N011&group=b: %v", nodes(b.Streams))
	}
	if b := get("state=DISCONNECTED"); !slices.Equal(nodes(b.Streams), []string{"n0000"}) {
		t.Errorf("state=DISCONNECTED: %v", nodes(b.Streams))
	}
	if b := get("state=SYNCED"); slices.Contains(nodes(b.Streams), "n0000") {
		t.Error("a closed stream is listed as SYNCED")
	}
	if b := get("type=LDS"); b.Total != 0 {
		t.Errorf("type=LDS matched %d", b.Total)
	}
	if b := get("offset=500"); len(b.Streams) != 0 || b.Total != 120 {
		t.Errorf("past the end: %d rows of %d", len(b.Streams), b.Total)
	}
	for _, bad := range []string{"limit=0", "limit=501", "limit=x", "offset=-1", "sort=address", "state=SYNCD", "q=" + strings.Repeat("x", maxFilter+1)} {
		if code, body := h.do(t, "GET", "/proxies?"+bad, writeTok, nil); code != http.StatusBadRequest || !strings.Contains(body, strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("/proxies?%s: %d %s, want 400 naming the parameter", bad, code, body)
		}
	}
	code, body := h.do(t, "GET", "/proxies", writeTok, nil)
	var all proxiesBody
	decode(t, body, &all)
	if code != http.StatusOK || len(all.Streams.([]any)) != 120 {
		t.Errorf("/proxies without paging: %d, %d streams", code, len(all.Streams.([]any)))
	}
}

// /summary counts open streams by group, type and state; closed streams
// are counted apart; file mode names the config path.
func TestSummary(t *testing.T) {
	h := dashHarness(t, trackerFleet(20), Options{Token: writeTok, Identifier: "r1", ConfigPath: "/etc/pylon/pylon.yaml"})
	code, body := h.do(t, "GET", "/summary", writeTok, nil)
	if code != http.StatusOK {
		t.Fatalf("/summary: %d %s", code, body)
	}
	var s summaryBody
	decode(t, body, &s)
	// Open: 1..19. a: 2,4,..,18 (9); b: 1,3,..,19 (10). NACKED: 3, 13
	// (b). STALE: 5, 12, 19 (b, a, b).
	want := []groupSummary{
		{Name: "a", Streams: 9, States: stateCounts{"CDS": {status.Synced: 8, status.Stale: 1}}},
		{Name: "b", Streams: 10, States: stateCounts{"CDS": {status.Synced: 6, status.Nacked: 2, status.Stale: 2}}},
	}
	if d := cmp.Diff(want, s.Groups); d != "" {
		t.Errorf("groups (-want +got):\n%s", d)
	}
	if s.Streams != 19 || s.Nodes != 19 || s.Gone != 1 || s.Totals["CDS"][status.Synced] != 14 {
		t.Errorf("streams %d nodes %d gone %d synced %d", s.Streams, s.Nodes, s.Gone, s.Totals["CDS"][status.Synced])
	}
	if s.Mode != "file" || s.ConfigPath != "/etc/pylon/pylon.yaml" || !slices.Equal(s.Types, []string{"CDS"}) {
		t.Errorf("mode %q path %q types %v", s.Mode, s.ConfigPath, s.Types)
	}
	if len(s.Replicas) != 1 || s.Replicas[0] != (replicaCount{Name: "r1", Streams: 19}) {
		t.Errorf("replicas %+v", s.Replicas)
	}
}

// A rollout curve keeps at most maxSeries+1 points, ends at the total,
// and never decreases.
func TestRolloutSeries(t *testing.T) {
	for _, n := range []int{0, 1, 7, maxSeries, maxSeries + 1, 10000} {
		done := make([]time.Duration, n)
		for i := range done {
			done[i] = time.Duration(i) * time.Millisecond
		}
		s := series(done)
		if len(s) > maxSeries+1 || n > 0 && s[len(s)-1] != [2]float64{done[n-1].Seconds(), float64(n)} || n == 0 && len(s) != 0 {
			t.Errorf("n=%d: %d points, last %v", n, len(s), s[max(len(s)-1, 0):])
		}
		for i := 1; i < len(s); i++ {
			if s[i][0] < s[i-1][0] || s[i][1] <= s[i-1][1] {
				t.Errorf("n=%d: not increasing at %d: %v %v", n, i, s[i-1], s[i])
			}
		}
	}
}

// The history says which token wrote each revision written through this
// replica; a dry run is not a revision; a rollback is.
func TestHistorySaysWho(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	doc := []byte(`{"services": [{"name": "web", "connect_timeout": "1s", "endpoints": [{"address": "127.0.0.1", "port": 80}]}]}`)
	if code, body := h.do(t, "POST", "/v1/apply?dryRun=true", writeTok, doc); code != http.StatusOK {
		t.Fatalf("dry run: %d %s", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, doc); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	_, body := h.do(t, "GET", "/v1/history", readTok, nil)
	var got struct{ History []historyEntry }
	decode(t, body, &got)
	want := "write token " + tokenID(writeTok) + " from 127.0.0.1"
	if len(got.History) != 1 || got.History[0].By != want {
		t.Fatalf("history %+v, want one entry by %q", got.History, want)
	}
	if strings.Contains(body, writeTok) {
		t.Fatal("the history shows the token")
	}
}

// The dashboard's assets are open and carry the strict headers; the
// summary is not.
func TestDashboardRoutes(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		resp, err := h.srv.Client().Get(h.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("GET %s: %d, CSP %q", p, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
	}
	if code, _ := h.do(t, "GET", "/summary", "", nil); code != http.StatusUnauthorized {
		t.Errorf("/summary without a token: %d", code)
	}
	resp, err := h.srv.Client().Get(h.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/" {
		t.Errorf("/ leads to %s, want /ui/", resp.Request.URL.Path)
	}
}

// Drift: a changed, a removed and a missing cluster against the group's
// snapshot; only full-state types list what is missing.
func TestDrift(t *testing.T) {
	reg := xdstype.New()
	snap := xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Cluster("c"),
		xdstest.Endpoints("a", 80), xdstest.Endpoints("b", 80), xdstest.Endpoints("c", 80))
	f := fleet.NewFleet(snap, time.Now())
	changedA := xdstest.Cluster("a")
	changedA.ConnectTimeout = nil
	sent := []proto.Message{changedA, xdstest.Cluster("b"), xdstest.Cluster("gone")}
	s := status.Stream{Group: fleet.DefaultGroup, Kind: "ADS", Types: []*status.Type{{Type: "CDS", State: status.Stale, Expected: "v2", ACKed: &status.Stamp{Version: "v1"}, LastSent: sent}}}
	got := drift(reg, f, s)
	want := []typeDrift{{Type: "CDS", Runs: "v1", Should: "v2", Changed: []string{"a"}, Removed: []string{"gone"}, Missing: []string{"c"}, Carried: 3, GroupHas: 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("drift (-want +got):\n%s", d)
	}
	s.Kind = "ADS delta"
	if got := drift(reg, f, s); len(got[0].Missing) != 0 {
		t.Errorf("a delta stream's last response is not its whole set, yet missing %v", got[0].Missing)
	}
}

// With replicas, the summary counts each one's streams and /proxies
// filters by replica.
func TestSummaryReplicas(t *testing.T) {
	fleet := otherReplicas{remote: []fleetstatus.Remote{
		{Replica: "r2", Proxy: fleetstatus.Proxy{Node: "x", Group: "a", Kind: "ADS", Types: []fleetstatus.Type{{Type: "CDS", State: status.Nacked}}}},
		{Replica: "r2", Proxy: fleetstatus.Proxy{Node: "y", Group: "a", Kind: "ADS"}},
		{Replica: "r3", Proxy: fleetstatus.Proxy{Node: "z", Group: "b", Kind: "ADS"}},
	}}
	h := dashHarness(t, trackerFleet(3), Options{Token: writeTok, Identifier: "r1", Fleet: fleet})
	_, body := h.do(t, "GET", "/summary", writeTok, nil)
	var s summaryBody
	decode(t, body, &s)
	want := []replicaCount{{"r1", 2}, {"r2", 2}, {"r3", 1}}
	if d := cmp.Diff(want, s.Replicas); d != "" || s.Groups[0].States["CDS"][status.Nacked] != 1 {
		t.Errorf("replicas (-want +got):\n%s\ngroups %+v", d, s.Groups)
	}
	_, body = h.do(t, "GET", "/proxies?replica=r2&sort=-node", writeTok, nil)
	var b pageBody
	decode(t, body, &b)
	if !slices.Equal(nodes(b.Streams), []string{"y", "x"}) || b.Streams[0].Replica != "r2" {
		t.Errorf("replica=r2: %v", nodes(b.Streams))
	}
}

// Endpoint registrations make no history entry, so they do not take the
// history's "by" slots: after more registrations than the slots, the
// apply before them still says who wrote it.
func TestHistoryByOutlivesRegistrations(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	doc := []byte(`{"services": [{"name": "web", "connect_timeout": "1s", "endpoints": [{"address": "127.0.0.1", "port": 80}]}]}`)
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, doc); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	for i := range maxAuthors + 1 {
		ep := fmt.Appendf(nil, `{"address":"10.0.%d.%d","port":80}`, i/250, i%250+1)
		if code, body := h.do(t, "POST", "/v1/services/web/endpoints", writeTok, ep); code >= 300 {
			t.Fatalf("registration %d: %d %s", i, code, body)
		}
	}
	_, body := h.do(t, "GET", "/v1/history", readTok, nil)
	var got struct{ History []historyEntry }
	decode(t, body, &got)
	want := "write token " + tokenID(writeTok) + " from 127.0.0.1"
	if len(got.History) != 1 || got.History[0].By != want {
		t.Fatalf("history %+v, want one entry by %q", got.History, want)
	}
}
