// Package metrics holds Pylon's Prometheus metrics. Labels are bounded: the
// resource type, the stream kind, a result, a state, a certificate kind;
// never a node, a stream or a certificate's name (that is what the status
// API is for).
package metrics

import (
	"runtime"
	"runtime/debug"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pylon-xds/pylon/internal/cowmap"
	"github.com/pylon-xds/pylon/internal/status"
)

// Metrics are the server's metrics, registered on their own registry.
type Metrics struct {
	Registry *prometheus.Registry
	// names are the families registered here, in order.
	names []string

	streams   *prometheus.GaugeVec
	nacks     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	firstSync *prometheus.HistogramVec
	publishes *prometheus.CounterVec
	events    prometheus.Counter
	reloads   prometheus.Counter
	refused   *prometheus.CounterVec
	ignored   *prometheus.CounterVec
	// connsClosed counts the xDS connections that ended, by how.
	connsClosed *prometheus.CounterVec
	// spared and sparedBytes count the responses a reconnecting client
	// already held, and so was not sent (X24).
	spared, sparedBytes *prometheus.CounterVec
	// pushLatency holds the per-type children each push's latency
	// observes (harvested at a scrape: see harvested), looked up without
	// the vector's label hashing and lock (children).
	pushLatency children[prometheus.Observer]
	// The last load's result, as Prometheus exports its own reloads.
	reloadOK, reloadOKAt, configRefused prometheus.Gauge
	rollout                             rolloutMetrics
	git                                 gitMetrics
	balance                             balanceMetrics
	kube                                kubeMetrics
	expiry                              *certExpiry
}

// latencyBuckets cover a push from milliseconds to the 30 s a slow fleet
// may take; first syncs use the same, so the two compare.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// New registers every metric; tracker supplies the proxies-by-state gauges.
func New(tracker *status.Tracker) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.streams = register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pylon_xds_streams", Help: "Open xDS streams by kind (ads, ads_delta, per_type, per_type_delta).",
	}, []string{"kind"}), "pylon_xds_streams")
	register(m, &xdsTotals{tracker: tracker}, "pylon_xds_responses_total", "pylon_xds_response_bytes_total", "pylon_xds_acks_total")
	m.nacks = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_xds_nacks_total", Help: "NACKs received, by resource type.",
	}, []string{"type"}), "pylon_xds_nacks_total")
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "pylon_push_latency_seconds",
		Help: "From a config change's acceptance (or, for a proxy a staged rollout held back, its stage's start) to a connected proxy's ACK of it, by resource type. " +
			"Only changes accepted while the stream was open: a new stream's initial config is pylon_first_sync_seconds. " +
			"Measured when read (a scrape, a status request): a proxy that took several versions of a type in between counts its newest.",
		Buckets: latencyBuckets,
	}, []string{"type"})
	register(m, &harvested{tracker: tracker, latency: m.latency}, "pylon_push_latency_seconds")
	m.firstSync = register(m, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pylon_first_sync_seconds",
		Help:    "From a stream's open to its first SYNCED state of a resource type (its initial config ACKed), by type.",
		Buckets: latencyBuckets,
	}, []string{"type"}), "pylon_first_sync_seconds")
	m.registerConfig()
	m.registerRollout()
	m.registerGit()
	m.registerBalance()
	m.registerKube()
	m.refused = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_xds_streams_refused_total",
		Help: "xDS streams the server ended on purpose or refused, by reason (identity_mismatch, bad_node, resource_names, stalled, flood, busy, no_request: no request within 30s of the stream opening, draining, max_streams: over --max-streams-per-connection, balance: over this replica's share, shed: ended to come down to it, other_shard: the node's group served by another shard).",
	}, []string{"reason"}), "pylon_xds_streams_refused_total")
	m.connsClosed = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_xds_connections_closed_total",
		Help: "xDS client connections that ended, by reason: client_closed, or closed by the server: evicted, write_deadline, too_many_pings, goaway_error, goaway (maximum age or stop), drained, balanced (refused or shed for balance), other_shard, tls_handshake, client_cert_revoked (its CA left --xds-client-ca), client_cert_expired, transport (keepalive unanswered, read or write error).",
	}, []string{"reason"}), "pylon_xds_connections_closed_total")
	m.ignored = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_xds_requests_ignored_total", Help: "xDS requests ignored, by reason (unknown_type); logged once a stream.",
	}, []string{"reason"}), "pylon_xds_requests_ignored_total")
	m.spared = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_xds_resends_spared_total",
		Help: "Responses not sent because a reconnecting state-of-the-world client already held exactly their content (its version_info matched), by resource type.",
	}, []string{"type"}), "pylon_xds_resends_spared_total")
	m.sparedBytes = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_xds_resend_bytes_spared_total",
		Help: "Encoded bytes of the responses counted by pylon_xds_resends_spared_total, by resource type.",
	}, []string{"type"}), "pylon_xds_resend_bytes_spared_total")
	register(m, &typeStates{tracker: tracker}, proxyTypes)
	m.expiry = register(m, &certExpiry{}, certExpiryName)
	register(m, buildInfo(), "pylon_build_info")
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerConfig registers the config pipeline's metrics.
func (m *Metrics) registerConfig() {
	m.publishes = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_config_publishes_total", Help: "Config loads by result: published, unchanged, refused.",
	}, []string{"result"}), "pylon_config_publishes_total")
	m.events = register(m, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pylon_config_source_events_total", Help: "File events seen by the config watcher, before debouncing.",
	}), "pylon_config_source_events_total")
	m.reloads = register(m, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pylon_config_reloads_total", Help: "Config reads after debouncing (and resyncs): events per reload is the batching.",
	}), "pylon_config_reloads_total")
	m.reloadOK = register(m, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pylon_config_last_reload_successful", Help: "Whether the last config load was accepted (1) or refused (0).",
	}), "pylon_config_last_reload_successful")
	m.reloadOKAt = register(m, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pylon_config_last_reload_success_timestamp_seconds", Help: "When a config load was last accepted, in seconds since the epoch.",
	}), "pylon_config_last_reload_success_timestamp_seconds")
	m.configRefused = register(m, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pylon_config_refused", Help: "1 while the current config is refused (the last good one keeps serving), else 0.",
	}), "pylon_config_refused")
}

// register registers c, which exports the families named names, and
// returns it. The names are given again here because a collector does not
// say its names except in its descriptions' text.
func register[C prometheus.Collector](m *Metrics, c C, names ...string) C {
	m.Registry.MustRegister(c)
	m.names = append(m.names, names...)
	return c
}

// Names returns the name of every metric family Pylon exports: its own,
// and the Go runtime's and process's from their collectors. For checking
// dashboards and alert rules against what exists.
func (m *Metrics) Names() []string {
	seen := map[string]bool{}
	for _, n := range m.names {
		seen[n] = true
	}
	// The runtime and process collectors always export every family they
	// describe, so a gather lists them.
	if families, err := m.Registry.Gather(); err == nil {
		for _, f := range families {
			seen[f.GetName()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

const proxyTypes = "pylon_proxy_types"

// stateLabels are the per-type states as metric label values: lower snake
// case (the status API's "NOT SENT" has a space).
var stateLabels = map[string]string{status.Synced: "synced", status.Stale: "stale", status.Nacked: "nacked", status.NotSent: "not_sent"}

// typeStates exports the open streams' types by type and state, as the
// tracker counts them when asked (a walk of the open streams).
type typeStates struct {
	tracker *status.Tracker
}

var typeStatesDesc = prometheus.NewDesc(proxyTypes,
	"Resource types of open streams, by type and state (synced, stale, nacked, not_sent).", []string{"type", "state"}, nil)

func (c *typeStates) Describe(ch chan<- *prometheus.Desc) { ch <- typeStatesDesc }

func (c *typeStates) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.tracker.Counts() {
		ch <- prometheus.MustNewConstMetric(typeStatesDesc, prometheus.GaugeValue, float64(n.N), n.Type, stateLabels[n.State])
	}
}

// xdsTotals exports the responses sent and ACKs received by type, as the
// streams count them (status.Tracker.Totals): each stream counts its own,
// summed at a scrape, rather than every response and ACK of every stream
// adding to counters that every core shares.
type xdsTotals struct {
	tracker *status.Tracker
}

var (
	responsesDesc = prometheus.NewDesc("pylon_xds_responses_total", "xDS responses sent, by resource type.", []string{"type"}, nil)
	bytesDesc     = prometheus.NewDesc("pylon_xds_response_bytes_total", "Encoded bytes of xDS responses sent, by resource type.", []string{"type"}, nil)
	acksDesc      = prometheus.NewDesc("pylon_xds_acks_total", "ACKs received, by resource type.", []string{"type"}, nil)
)

func (c *xdsTotals) Describe(ch chan<- *prometheus.Desc) {
	ch <- responsesDesc
	ch <- bytesDesc
	ch <- acksDesc
}

func (c *xdsTotals) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.tracker.Totals() {
		ch <- prometheus.MustNewConstMetric(responsesDesc, prometheus.CounterValue, float64(n.Responses), n.Type)
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(n.ResponseBytes), n.Type)
		ch <- prometheus.MustNewConstMetric(acksDesc, prometheus.CounterValue, float64(n.ACKs), n.Type)
	}
}

// harvested is pylon_push_latency_seconds, which the tracker measures
// when read (status.Tracker.Harvest): a scrape harvests the pushes since
// the last read before the histogram is collected.
type harvested struct {
	tracker *status.Tracker
	latency *prometheus.HistogramVec
}

func (c *harvested) Describe(ch chan<- *prometheus.Desc) { c.latency.Describe(ch) }

func (c *harvested) Collect(ch chan<- prometheus.Metric) {
	c.tracker.Harvest()
	c.latency.Collect(ch)
}

// buildInfo is pylon_build_info: 1, labelled with the module version, the
// VCS revision and the Go version the binary was built with.
func buildInfo() prometheus.Gauge {
	version, revision, goversion := "unknown", "unknown", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, goversion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "pylon_build_info",
		Help:        "Always 1; the labels say which Pylon build is running.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goversion},
	})
	g.Set(1)
	return g
}

// StreamOpened and StreamClosed count open streams.
func (m *Metrics) StreamOpened(kind string) { m.streams.WithLabelValues(kind).Inc() }

// StreamClosed counts a stream's end.
func (m *Metrics) StreamClosed(kind string) { m.streams.WithLabelValues(kind).Dec() }

// Spared counts a response of typ that was not sent because the client
// already held its content (X24), and the bytes it would have had.
func (m *Metrics) Spared(typ string, bytes int) {
	m.spared.WithLabelValues(typ).Inc()
	m.sparedBytes.WithLabelValues(typ).Add(float64(bytes))
}

// NACK counts a NACK of typ.
func (m *Metrics) NACK(typ string) { m.nacks.WithLabelValues(typ).Inc() }

// Latency records a push latency of typ.
func (m *Metrics) Latency(typ string, d time.Duration) {
	m.pushLatency.of(typ, m.latency.WithLabelValues).Observe(d.Seconds())
}

// FirstSync records a stream's first sync of typ.
func (m *Metrics) FirstSync(typ string, d time.Duration) {
	m.firstSync.WithLabelValues(typ).Observe(d.Seconds())
}

// Publish counts a config load's result ("published", "unchanged" or
// "refused") and sets the last-reload gauges: a refused load leaves the
// last good config serving, and the current one refused until a later load
// is accepted.
func (m *Metrics) Publish(result string) {
	m.PublishAt(result, time.Now())
}

// PublishAt is Publish for a load that ended at at.
func (m *Metrics) PublishAt(result string, at time.Time) {
	m.publishes.WithLabelValues(result).Inc()
	if result == "refused" {
		m.reloadOK.Set(0)
		m.configRefused.Set(1)
		return
	}
	m.reloadOK.Set(1)
	m.reloadOKAt.Set(float64(at.UnixNano()) / 1e9)
	m.configRefused.Set(0)
}

// SourceEvent counts a file event; Reload a debounced read.
func (m *Metrics) SourceEvent() { m.events.Inc() }

// Reload counts a config read.
func (m *Metrics) Reload() { m.reloads.Inc() }

// Refused counts a stream the server ended on purpose. reason must come
// from a small fixed set (the xds package's Refused constants).
func (m *Metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// ConnectionClosed counts an xDS connection that ended, by a reason from a
// small fixed set (status.ConnectionClosed events).
func (m *Metrics) ConnectionClosed(reason string) { m.connsClosed.WithLabelValues(reason).Inc() }

// Ignored counts an ignored request, by a reason from a small fixed set.
func (m *Metrics) Ignored(reason string) { m.ignored.WithLabelValues(reason).Inc() }

// children caches a vector's children by their one label's value, read
// without a lock. The values are the few type names; past maxChildren new
// ones are not kept (looked up each time).
type children[T any] struct{ m cowmap.Map[string, T] }

const maxChildren = 64

// of returns the child of label value v, made by newChild the first time.
func (c *children[T]) of(v string, newChild func(...string) T) T {
	if x, ok := c.m.Load()[v]; ok {
		return x
	}
	return c.m.LoadOrStore(v, newChild(v), maxChildren)
}
