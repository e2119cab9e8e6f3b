package admin

import (
	"hash/maphash"
	"net/http"
	"sort"
	"time"

	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/ui"
)

// The reads behind the dashboard (/ui/): a fleet summary computed here, so
// that a page watching 10,000 proxies fetches a few kilobytes per poll, and
// the rollout of the newest change. Scripts may use them too: they take
// the read token like every other read.

// Insight is what the status tracker knows beyond the streams: push
// latency percentiles and the rollout of the newest change.
// *status.Tracker implements it; a ProxySource that does not leaves both
// out.
type Insight interface {
	Latencies() []status.Latency
	Propagation() status.Propagation
}

func (o Options) insight() Insight {
	in, _ := o.Proxies.(Insight)
	return in
}

// registerDashboard adds the dashboard's assets (open: they hold no data)
// and its reads.
func registerDashboard(mux *http.ServeMux, g guard) {
	assets := ui.Handler()
	mux.Handle("GET /ui/", assets)
	mux.Handle("HEAD /ui/", assets)
	mux.Handle("GET /ui", http.RedirectHandler(ui.Prefix, http.StatusMovedPermanently))
	mux.Handle("GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))
	mux.HandleFunc("GET /summary", g.read(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, g.o.summary())
	}))
	mux.HandleFunc("GET /rollout", g.read(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, rolloutView(g.o.insight(), time.Now()))
	}))
	mux.HandleFunc("GET /rollout/staged", g.read(g.o.staged(maphash.MakeSeed())))
}

// summaryBody is GET /summary: the fleet at a glance.
type summaryBody struct {
	Identifier string `json:"identifier"`
	Version    string `json:"pylonVersion"`
	// Mode is "store" (the config is written through /v1) or "file"
	// (read-only: it comes from ConfigPath).
	Mode       string          `json:"mode"`
	ConfigPath string          `json:"configPath,omitempty"`
	Config     pipeline.Status `json:"config"`
	Degraded   bool            `json:"degraded"`
	Reason     string          `json:"reason,omitempty"`
	// Partial says why other replicas' proxies may be missing.
	Partial string `json:"partial,omitempty"`
	// Streams counts the open streams, Nodes their distinct node ids,
	// Gone the recently closed streams still listed.
	Streams int `json:"streams"`
	Nodes   int `json:"nodes"`
	Gone    int `json:"gone"`
	// Types names every type some open stream uses, sorted.
	Types    []string           `json:"types"`
	Groups   []groupSummary     `json:"groups"`
	Totals   stateCounts        `json:"totals"`
	Replicas []replicaCount     `json:"replicas"`
	Latency  []latencyView      `json:"latency"`
	States   []string           `json:"states"`
	At       time.Time          `json:"at"`
	Rollout  map[string]Rollout `json:"rollout"`
}

// stateCounts counts types of open streams per type name and state.
type stateCounts map[string]map[string]int

func (c stateCounts) add(typ, state string) {
	if c[typ] == nil {
		c[typ] = map[string]int{}
	}
	c[typ][state]++
}

// groupSummary is one group: its config version, its open streams, and
// their types per state.
type groupSummary struct {
	Name    string      `json:"name"`
	Version string      `json:"version,omitempty"`
	Streams int         `json:"streams"`
	States  stateCounts `json:"states"`
}

type replicaCount struct {
	Name    string `json:"name"`
	Streams int    `json:"streams"`
}

// latencyView is a type's push latency in milliseconds.
type latencyView struct {
	Type   string  `json:"type"`
	Window int     `json:"window"`
	Total  uint64  `json:"total"`
	P50    float64 `json:"p50Ms"`
	P90    float64 `json:"p90Ms"`
	P99    float64 `json:"p99Ms"`
	Max    float64 `json:"maxMs"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// summary counts every replica's open streams by group, type and state.
func (o Options) summary() summaryBody {
	entries, partial := o.proxies("")
	st := redactStatus(o.Pipeline.Status())
	b := summaryBody{
		Identifier: o.Identifier, Version: o.Version, Mode: "store", Config: st, Partial: partial,
		Totals: stateCounts{}, Types: []string{}, Groups: []groupSummary{}, Replicas: []replicaCount{}, Latency: []latencyView{},
		States: []string{status.Synced, status.Stale, status.Nacked, status.NotSent, Unknown}, At: time.Now(),
	}
	if o.Config == nil {
		b.Mode, b.ConfigPath = "file", o.ConfigPath
	}
	if o.PollGit != nil {
		b.Mode = "git"
	}
	b.Degraded, b.Reason = o.degraded()
	groups := map[string]*groupSummary{}
	for _, g := range st.Groups {
		groups[g.Name] = &groupSummary{Name: g.Name, Version: g.Version, States: stateCounts{}}
	}
	replicas, nodes, types := map[string]int{}, map[string]bool{}, map[string]bool{}
	var open []status.Stream
	for _, e := range entries {
		if e.Gone != nil {
			b.Gone++
			continue
		}
		open = append(open, e.Stream)
		b.Streams++
		nodes[e.Node] = true
		replicas[e.Replica]++
		g := groups[e.Group]
		if g == nil {
			g = &groupSummary{Name: e.Group, States: stateCounts{}}
			groups[e.Group] = g
		}
		g.Streams++
		for _, t := range e.Types {
			types[t.Type] = true
			state := t.State
			if e.Stale {
				// Another replica's, as last read before etcd became
				// unreachable: not known to hold now.
				state = Unknown
			}
			g.States.add(t.Type, state)
			b.Totals.add(t.Type, state)
		}
	}
	b.Nodes = len(nodes)
	b.Types = sortedKeys(types)
	for _, name := range sortedKeys(groups) {
		b.Groups = append(b.Groups, *groups[name])
	}
	for _, name := range sortedKeys(replicas) {
		b.Replicas = append(b.Replicas, replicaCount{Name: name, Streams: replicas[name]})
	}
	if in := o.insight(); in != nil {
		for _, l := range in.Latencies() {
			b.Latency = append(b.Latency, latencyView{Type: l.Type, Window: l.Window, Total: l.Total, P50: ms(l.P50), P90: ms(l.P90), P99: ms(l.P99), Max: ms(l.Max)})
		}
	}
	b.Rollout = rollout(open)
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxSeries bounds the points of a group's rollout curve.
const maxSeries = 120

// rolloutBody is GET /rollout: per group, how many of this replica's
// streams taking part in the newest change have ACKed it over time, and
// which have not.
type rolloutBody struct {
	At time.Time `json:"at,omitzero"`
	// Elapsed is how long ago the change was accepted (seconds).
	Elapsed float64        `json:"elapsedSeconds"`
	Groups  []groupRollout `json:"groups"`
	Note    string         `json:"note"`
}

type groupRollout struct {
	status.GroupPropagation
	// Series is the count of done streams over time: (seconds after At,
	// done by then), a step curve of at most maxSeries points.
	Series [][2]float64 `json:"series"`
}

const rolloutNote = "This replica's open streams; a stream takes part when it should hold a type version the newest change introduced, and is done once it has ACKed every such version"

func rolloutView(in Insight, now time.Time) rolloutBody {
	out := rolloutBody{Groups: []groupRollout{}, Note: rolloutNote}
	if in == nil {
		return out
	}
	r := in.Propagation()
	out.At = r.At
	if !r.At.IsZero() {
		out.Elapsed = now.Sub(r.At).Seconds()
	}
	for _, g := range r.Groups {
		out.Groups = append(out.Groups, groupRollout{GroupPropagation: g, Series: series(g.DoneAfter)})
	}
	return out
}

// series is a step curve of sorted durations: after each, how many are
// done. Past maxSeries points it keeps evenly spaced ones and the last.
func series(done []time.Duration) [][2]float64 {
	out := [][2]float64{}
	if len(done) == 0 {
		return out
	}
	step := max(1, (len(done)+maxSeries-1)/maxSeries)
	for i := step - 1; i < len(done); i += step {
		out = append(out, [2]float64{done[i].Seconds(), float64(i + 1)})
	}
	if last := len(done) - 1; (last+1)%step != 0 {
		out = append(out, [2]float64{done[last].Seconds(), float64(last + 1)})
	}
	return out
}
