package metrics

import "github.com/prometheus/client_golang/prometheus"

// RelayStats is what `pylon relay` reports of its keys at a scrape.
type RelayStats struct {
	// Keys are the keys held; Connected those whose upstream stream is up.
	Keys, Connected int
	// HeldBack counts what the keys' last builds held back.
	HeldBack int
	// UpstreamStreams counts the upstream streams opened since start, all
	// keys; NACKsReported the downstream NACKs sent upstream.
	UpstreamStreams, NACKsReported uint64
}

var (
	relayKeysDesc = prometheus.NewDesc("pylon_relay_keys",
		"Keys the relay holds: each a node group of its proxies and one upstream stream.", nil, nil)
	relayConnectedDesc = prometheus.NewDesc("pylon_relay_keys_connected",
		"Keys whose upstream stream is up and has answered; the others serve what they last had.", nil, nil)
	relayHeldDesc = prometheus.NewDesc("pylon_relay_held_back_resources",
		"Upstream resources the keys' last builds did not serve (a reference to what is missing, a Secret, a failed check): /status names them.", nil, nil)
	relayStreamsDesc = prometheus.NewDesc("pylon_relay_upstream_streams_total",
		"Upstream streams the relay opened, every key: one per key while no stream fails.", nil, nil)
	relayNACKsDesc = prometheus.NewDesc("pylon_relay_nacks_reported_total",
		"Downstream NACKs the relay reported upstream (once per upstream version of a type and key).", nil, nil)
)

// relayCollector reads a relay's stats at each scrape.
type relayCollector struct{ stats func() RelayStats }

func (c relayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{relayKeysDesc, relayConnectedDesc, relayHeldDesc, relayStreamsDesc, relayNACKsDesc} {
		ch <- d
	}
}

func (c relayCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(relayKeysDesc, prometheus.GaugeValue, float64(s.Keys))
	ch <- prometheus.MustNewConstMetric(relayConnectedDesc, prometheus.GaugeValue, float64(s.Connected))
	ch <- prometheus.MustNewConstMetric(relayHeldDesc, prometheus.GaugeValue, float64(s.HeldBack))
	ch <- prometheus.MustNewConstMetric(relayStreamsDesc, prometheus.CounterValue, float64(s.UpstreamStreams))
	ch <- prometheus.MustNewConstMetric(relayNACKsDesc, prometheus.CounterValue, float64(s.NACKsReported))
}

// Relay adds a relay's metrics, read from stats at each scrape (cheap,
// safe from any goroutine). Call once.
func (m *Metrics) Relay(stats func() RelayStats) {
	m.Registry.MustRegister(relayCollector{stats})
}
