// Package admin serves Pylon's admin HTTP API: the config status, the
// connected proxies and what they were sent, the snapshots per group,
// Prometheus metrics, health and readiness probes, and Go's profiler. Every
// dump is redacted: private keys never leave through this API.
package admin

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/redact"
	rolloutctl "github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/token"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// StatusSource reports what the pipeline last did.
type StatusSource interface {
	Status() pipeline.Status
}

// ProxySource lists the connected proxies.
type ProxySource interface {
	Streams() []status.Stream
}

// FleetView lists the proxies of the other replicas sharing the etcd
// store (fleetstatus.Fleet), and why the list is partial ("" when whole).
type FleetView interface {
	Remote() ([]fleetstatus.Remote, string)
	// Relays are the reports of the relays reporting to the other
	// replicas.
	Relays() []fleetstatus.RemoteRelay
}

// TokenSource gives the admin tokens in force; *token.Files is one.
type TokenSource interface {
	Current() token.Pair
}

// FleetSource is the fleet being served.
type FleetSource interface {
	Current() *fleet.Fleet
}

// Options configures the handler.
type Options struct {
	// relays are the relays' reports (POST /v1/relays/{relay}):
	// RelayReports, or made by Handler.
	relays *RelayReports

	Pipeline StatusSource
	Proxies  ProxySource
	Fleets   FleetSource
	Registry *xdstype.Registry
	Metrics  prometheus.Gatherer
	// Registerer, if set, takes the admin API's own metrics (refused
	// requests by reason).
	Registerer prometheus.Registerer
	// Config is the embedded store's service; nil in file mode, where the
	// /v1 API is read-only and says so.
	Config *configstore.Service
	// Token authorises writes, and reads too (Authorization: Bearer).
	Token string
	// ReadToken authorises reads: the status, the proxies, the dumps, the
	// stored config and its history, and the profiler. Empty: reads need
	// Token. With both empty nothing but the open probes and metrics is
	// served: secure by default, never open by accident.
	ReadToken string
	// Tokens, when set, are the tokens as their files hold them now, in
	// place of Token and ReadToken: a rotation takes effect without a
	// restart (token.Files).
	Tokens TokenSource
	// TokenFile and ReadTokenFile say where the tokens live, for the
	// message of a refused request (never the token itself).
	TokenFile, ReadTokenFile string
	// RelayToken, when set, authorises the relays' reports (POST
	// /v1/relays/{relay}) and nothing else; the write token does too, the
	// read token never (a reader could post any relay's report and hide
	// its NACKs). RelayTokenFile names its file in a refusal's message.
	RelayToken, RelayTokenFile string
	// Identifier names this Pylon replica: the replica of its own
	// proxies in /proxies.
	Identifier string
	// Fleet, with the etcd store, adds the other replicas' proxies to
	// /proxies and /proxies/{id}, and their relays' reports to /proxies;
	// nil lists this replica's only.
	Fleet FleetView
	// RelayReports, if set, holds the relays' reports posted here, shared
	// with what publishes them to the other replicas (nil: Handler keeps
	// its own).
	RelayReports *RelayReports
	// Shard is the node groups this replica serves (--groups), shown with
	// its proxies; "" when it serves every group.
	Shard string
	// Degraded reports whether the config store is unreachable, and why
	// (configstore.Service.Degraded); nil when it cannot be (file mode).
	// Degraded, the replica still serves its last good config: /readyz
	// stays 200 and says "degraded", /status carries the reason.
	Degraded func() (bool, string)
	// Draining reports whether this replica is handing its proxies over to
	// the others (a graceful stop): /readyz answers 503 so that load
	// balancers and new proxies go elsewhere. Nil: never.
	Draining func() bool
	// Rollouts drives the staged rollouts (/v1/rollouts); nil: none.
	Rollouts Rollouts
	// Sources, if set, is what the sources say of themselves (each
	// Kubernetes cluster: reachable or not, since when, its last error),
	// shown in /status.
	Sources func() source.Status
	// PollGit, with a Git source, makes it poll at once
	// (POST /v1/sources/git/poll, the webhook); nil: there is none.
	PollGit func()
	// ConfigPath is, in file mode, the --config path, and with a Git
	// source the repository (its URL as shown: no password), ref and
	// folder: the dashboard names it in its read-only notice. Empty: not
	// named.
	ConfigPath string
	// Version is the Pylon build version.
	Version string
	// Logger receives the audit line of every admin write ("admin write")
	// and the lease expiries; nil discards them.
	Logger *slog.Logger
}

// readyzDegraded is what the open /readyz says of an unreachable store.
const readyzDegraded = "config store unreachable: serving the last good config, writes refused; the cause is in GET /status"

// readyzDraining is what /readyz says of a replica in its graceful stop.
const readyzDraining = "stopping: handing its proxies over to the other replicas"

// degraded is Degraded, false when there is none.
func (o Options) degraded() (bool, string) {
	if o.Degraded == nil {
		return false, ""
	}
	return o.Degraded()
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// statusBody is the JSON of GET /status.
type statusBody struct {
	Identifier string          `json:"identifier"`
	Version    string          `json:"pylonVersion"`
	Config     pipeline.Status `json:"config"`
	// Degraded: the config store is unreachable (Reason says since when
	// and why); the last good config keeps serving, writes are refused.
	Degraded bool   `json:"degraded"`
	Reason   string `json:"reason,omitempty"`
	// Partial says why other replicas' proxies may be missing or out of
	// date (etcd unreadable: as of when); "" when the list is whole or
	// there is no other replica.
	Partial string `json:"partial,omitempty"`
	// Sources say what the sources say of themselves: each Kubernetes
	// cluster, reachable or not (away, its last endpoints keep serving).
	Sources *source.Status `json:"sources,omitempty"`
	// Rollout counts, per group, the open streams holding the group's
	// current config in every type they use, against all of them.
	Rollout map[string]Rollout `json:"rollout"`
	// Staged are the staged rollouts in progress or halted
	// (GET /v1/rollouts).
	Staged []rolloutctl.Status `json:"stagedRollouts,omitempty"`
	// Clients are the groups whose connected proxyless gRPC clients their
	// `clients:` does not state (status.ClientWarnings): shown, never
	// compiled.
	Clients []string `json:"clientWarnings,omitempty"`
}

// Rollout is a group's progress toward its current config.
type Rollout struct {
	Synced int `json:"synced"`
	Total  int `json:"total"`
}

// Handler returns the admin HTTP handler. /healthz, /readyz and /metrics
// are open (probes and scrapers carry no token; they show nothing of the
// config); every other read needs the read or the write token, every write
// the write token. At most maxInFlight requests are served at once.
func Handler(o Options) http.Handler {
	return handler(o, newLimiter(maxInFlight, busyWait))
}

func handler(o Options, l *limiter) http.Handler {
	mux := http.NewServeMux()
	o.relays = o.RelayReports
	if o.relays == nil {
		o.relays = NewRelayReports()
	}
	g := guard{o: o, fails: newRefusals(o.Registerer, o.logger())}
	mux.HandleFunc("GET /status", g.read(func(w http.ResponseWriter, r *http.Request) {
		streams := o.Proxies.Streams()
		body := statusBody{Identifier: o.Identifier, Version: o.Version, Config: redactStatus(o.Pipeline.Status()), Rollout: rollout(streams)}
		if f := o.Fleets.Current(); f != nil {
			body.Clients = status.ClientWarnings(f.Rules(), streams)
		}
		if o.Rollouts != nil {
			body.Staged = o.Rollouts.Status()
		}
		body.Degraded, body.Reason = o.degraded()
		if o.Sources != nil {
			st := o.Sources()
			body.Sources = &st
		}
		if o.Fleet != nil {
			_, body.Partial = o.Fleet.Remote()
		}
		writeJSON(w, http.StatusOK, body)
	}))
	mux.HandleFunc("GET /proxies", g.read(o.listProxies))
	mux.HandleFunc("GET /proxies/{id}", g.read(o.proxy))
	mux.HandleFunc("GET /config", g.read(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("previous") == "true" {
			previousDump(w, o.Fleets.Current(), q.Get("group"))
			return
		}
		configDump(w, o.Fleets.Current(), q.Get("group"))
	}))
	who := newAuthors()
	registerAPI(mux, g, who)
	registerRollouts(mux, g, who)
	registerGitPoll(mux, g, who)
	registerGroups(mux, g)
	registerRelays(mux, g, o.relays)
	registerDashboard(mux, g)
	if o.Metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Metrics, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		// A draining replica is on its way out whatever else holds: new
		// proxies belong on the others.
		if o.Draining != nil && o.Draining() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining", "reason": readyzDraining})
			return
		}
		// Ready once a config is being served. A refused later change does
		// not make Pylon unready: the last good config is still served.
		if o.Pipeline.Status().Version == "" {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "no config published yet"})
			return
		}
		// An unreachable store does not either: proxies, new ones too,
		// are best served the last good config, and with etcd down every
		// replica is in the same state, so a 503 would only take the whole
		// fleet out of its load balancer. The body says so; the cause,
		// which names etcd's addresses, is for token holders (/status):
		// this probe is open.
		if bad, _ := o.degraded(); bad {
			writeJSON(w, http.StatusOK, map[string]string{"status": "degraded", "reason": readyzDegraded})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	// The profiler shows the command line and the heap: a read, with a token.
	mux.HandleFunc("GET /debug/pprof/", g.read(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/cmdline", g.read(pprof.Cmdline))
	mux.HandleFunc("GET /debug/pprof/profile", g.read(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/symbol", g.read(pprof.Symbol))
	mux.HandleFunc("GET /debug/pprof/trace", g.read(pprof.Trace))
	return bounded(l, jsonErrors(mux))
}

// listProxies answers GET /proxies: every stream with its node, group and
// per-type state; a node in no group shows "no matching group": it connects
// fine and receives nothing, the failure this page exists to make visible.
// With replicas, every replica's, each naming its replica. With paging
// parameters, one page of the filtered, sorted list.
func (o Options) listProxies(w http.ResponseWriter, r *http.Request) {
	streams, partial := o.proxies("")
	if !paged(r) {
		writeJSON(w, http.StatusOK, proxiesBody{Streams: streams, Partial: partial, Relays: o.relaysOf()})
		return
	}
	p, err := parsePage(r)
	if err != nil {
		fail(w, err)
		return
	}
	b := page(streams, p)
	b.Partial = partial
	writeJSON(w, http.StatusOK, b)
}

// proxy answers GET /proxies/{id}: the node's streams, what each was last
// sent, and how that differs from what it should run.
func (o Options) proxy(w http.ResponseWriter, r *http.Request) {
	var out []proxyDump
	streams, partial := o.proxies(r.PathValue("id"))
	f := o.Fleets.Current()
	for _, s := range streams {
		out = append(out, dumpStream(o.Registry, f, s))
	}
	if len(out) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no stream of node " + redact.String(r.PathValue("id"))})
		return
	}
	writeJSON(w, http.StatusOK, proxiesBody{Streams: out, Partial: partial})
}

// configDump writes the fleet's resources per group, redacted.
func configDump(w http.ResponseWriter, f *fleet.Fleet, group string) {
	if f == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no config published yet"})
		return
	}
	var out []groupDump
	for _, g := range f.Groups() {
		if group != "" && g.Name != group {
			continue
		}
		out = append(out, dumpGroup(g.Name, g.Snapshot))
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": f.Version(), "groups": out})
}

// previousDump writes, for a group in a staged rollout, the snapshot its
// nodes outside the stage run (redacted, as configDump's).
func previousDump(w http.ResponseWriter, f *fleet.Fleet, group string) {
	if f == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no config published yet"})
		return
	}
	prev, _ := f.Previous(group)
	if prev == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "group " + redact.String(group) + " is in no staged rollout: every node of it runs its current config"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": f.Version(), "groups": []groupDump{dumpGroup(group, prev)}})
}

func dumpGroup(name string, s *snapshot.Snapshot) groupDump {
	gd := groupDump{Name: name, Version: s.Version(), Resources: map[string][]json.RawMessage{}}
	for _, set := range s.Sets() {
		for _, n := range set.Names() {
			gd.Resources[set.Type().Kind] = append(gd.Resources[set.Type().Kind], dump(set.Get(n).Message))
		}
	}
	return gd
}

// scrubStreams redacts what a proxy wrote into its NACKs: an Envoy error
// detail may quote the config it refused. The tracker's types are shared
// and read-only, so a changed one is copied.
func scrubStreams(streams []status.Stream) []status.Stream {
	for i, s := range streams {
		var types []*status.Type
		for j, t := range s.Types {
			if t.LastNACK == nil || redact.String(t.LastNACK.Detail) == t.LastNACK.Detail {
				continue
			}
			if types == nil {
				types = append([]*status.Type(nil), s.Types...)
			}
			c, n := *t, *t.LastNACK
			n.Detail = redact.String(n.Detail)
			c.LastNACK = &n
			types[j] = &c
		}
		if types != nil {
			streams[i].Types = types
		}
	}
	return streams
}

// redactStatus scrubs the last refusal's error: diagnostics render
// redacted on their own, but a refusal that is not a diagnostic list (a
// source's error) is plain text that may quote its input.
func redactStatus(s pipeline.Status) pipeline.Status {
	if s.Refused != nil {
		r := *s.Refused
		r.Error = redact.String(r.Error)
		s.Refused = &r
	}
	return s
}

func rollout(streams []status.Stream) map[string]Rollout {
	out := map[string]Rollout{}
	for _, s := range streams {
		if s.Gone != nil || s.Group == status.NoGroup {
			continue
		}
		r := out[s.Group]
		r.Total++
		synced := len(s.Types) > 0
		for _, t := range s.Types {
			synced = synced && (t.State == status.Synced || t.State == status.NotSent)
		}
		if synced {
			r.Synced++
		}
		out[s.Group] = r
	}
	return out
}

type groupDump struct {
	Name      string                       `json:"name"`
	Version   string                       `json:"version"`
	Resources map[string][]json.RawMessage `json:"resources"`
}

// proxyDump is a stream's status and exactly what it was last sent, per
// type, redacted.
type proxyDump struct {
	proxyEntry
	LastSent map[string][]json.RawMessage `json:"lastSent"`
	// Drift is, per type, what the proxy runs against what it should.
	Drift []typeDrift `json:"drift"`
}

func dumpStream(reg *xdstype.Registry, f *fleet.Fleet, s proxyEntry) proxyDump {
	d := proxyDump{proxyEntry: s, LastSent: map[string][]json.RawMessage{}, Drift: []typeDrift{}}
	if !s.Remote {
		// What another replica's stream was sent stays there: nothing
		// to compare here.
		d.Drift = drift(reg, f, s.Stream)
	}
	for _, t := range s.Types {
		for _, m := range t.LastSent {
			d.LastSent[t.Type] = append(d.LastSent[t.Type], dump(m))
		}
	}
	return d
}

// dump is a resource as JSON, redacted.
func dump(m proto.Message) json.RawMessage {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(redact.Message(m))
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": redact.String(err.Error())})
	}
	return b
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
