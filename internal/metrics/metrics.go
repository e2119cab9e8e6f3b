// Package metrics holds Pylon's Prometheus metrics. Labels are bounded: the
// resource type, the stream kind, a result, a state; never a node or a
// stream (that is what the status API is for).
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pylon-xds/pylon/internal/status"
)

// Metrics are the server's metrics, registered on their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	streams   *prometheus.GaugeVec
	responses *prometheus.CounterVec
	bytes     *prometheus.CounterVec
	acks      *prometheus.CounterVec
	nacks     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	publishes *prometheus.CounterVec
	events    prometheus.Counter
	reloads   prometheus.Counter
	refused   *prometheus.CounterVec
	ignored   *prometheus.CounterVec
}

// New registers every metric; tracker supplies the proxies-by-state gauges.
func New(tracker *status.Tracker) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pylon_xds_streams", Help: "Open xDS streams by kind (ads, ads_delta, per_type, per_type_delta).",
		}, []string{"kind"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pylon_xds_responses_total", Help: "xDS responses sent, by resource type.",
		}, []string{"type"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pylon_xds_response_bytes_total", Help: "Encoded bytes of xDS responses sent, by resource type.",
		}, []string{"type"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pylon_xds_acks_total", Help: "ACKs received, by resource type.",
		}, []string{"type"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pylon_xds_nacks_total", Help: "NACKs received, by resource type.",
		}, []string{"type"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pylon_push_latency_seconds",
			Help:    "From a config change's acceptance to a proxy's ACK of it, by resource type.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"type"}),
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pylon_config_publishes_total", Help: "Config loads by result: published, unchanged, refused.",
		}, []string{"result"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pylon_config_source_events_total", Help: "File events seen by the config watcher, before debouncing.",
		}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pylon_config_reloads_total", Help: "Config reads after debouncing (and resyncs): events per reload is the batching.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pylon_xds_streams_refused_total",
			Help: "xDS streams the server ended on purpose, by reason (identity_mismatch, bad_node, resource_names, stalled, flood, busy).",
		}, []string{"reason"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pylon_xds_requests_ignored_total", Help: "xDS requests ignored, by reason (unknown_type); logged once a stream.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.streams, m.responses, m.bytes, m.acks, m.nacks, m.latency, m.publishes, m.events, m.reloads, m.refused, m.ignored,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, state := range []string{status.Synced, status.Stale, status.Nacked, status.NotSent} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "pylon_proxy_types",
			Help:        "Resource types of open streams by state (SYNCED, STALE, NACKED, NOT SENT).",
			ConstLabels: prometheus.Labels{"state": state},
		}, func() float64 { return float64(tracker.States()[state]) }))
	}
	return m
}

// StreamOpened and StreamClosed count open streams.
func (m *Metrics) StreamOpened(kind string) { m.streams.WithLabelValues(kind).Inc() }

// StreamClosed counts a stream's end.
func (m *Metrics) StreamClosed(kind string) { m.streams.WithLabelValues(kind).Dec() }

// Sent counts a response of typ and its size.
func (m *Metrics) Sent(typ string, bytes int) {
	m.responses.WithLabelValues(typ).Inc()
	m.bytes.WithLabelValues(typ).Add(float64(bytes))
}

// ACK counts an ACK of typ.
func (m *Metrics) ACK(typ string) { m.acks.WithLabelValues(typ).Inc() }

// NACK counts a NACK of typ.
func (m *Metrics) NACK(typ string) { m.nacks.WithLabelValues(typ).Inc() }

// Latency records a push latency of typ.
func (m *Metrics) Latency(typ string, d time.Duration) {
	m.latency.WithLabelValues(typ).Observe(d.Seconds())
}

// Publish counts a config load's result.
func (m *Metrics) Publish(result string) { m.publishes.WithLabelValues(result).Inc() }

// SourceEvent counts a file event; Reload a debounced read.
func (m *Metrics) SourceEvent() { m.events.Inc() }

// Reload counts a config read.
func (m *Metrics) Reload() { m.reloads.Inc() }

// Refused counts a stream the server ended on purpose. reason must come
// from a small fixed set (the xds package's Refused constants).
func (m *Metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// Ignored counts an ignored request, by a reason from a small fixed set.
func (m *Metrics) Ignored(reason string) { m.ignored.WithLabelValues(reason).Inc() }
