package metrics

import "github.com/prometheus/client_golang/prometheus"

// balanceMetrics are the replicas' load balancing's (xds.Balance): no
// label but the shed stream's kind (delta or sotw).
type balanceMetrics struct {
	target  prometheus.Gauge
	refused prometheus.Counter
	shed    *prometheus.CounterVec
}

func (m *Metrics) registerBalance() {
	m.balance.target = register(m, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pylon_balance_target_streams",
		Help: "The most xDS streams this replica holds before it refuses and sheds (ceil(streams of its shard / replicas x 1.1), at least the mean plus 2); 0 when nothing is balanced: one replica, or the others' counts not read lately (etcd away).",
	}), "pylon_balance_target_streams")
	m.balance.refused = register(m, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pylon_balance_refused_total",
		Help: "New xDS streams refused with RESOURCE_EXHAUSTED because this replica held more than its target.",
	}), "pylon_balance_refused_total")
	m.balance.shed = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_balance_shed_total",
		Help: "Open xDS streams this replica ended (UNAVAILABLE) to come down to its target, by kind: delta (shed first: they resume with nothing resent) or sotw.",
	}, []string{"kind"}), "pylon_balance_shed_total")
}

// BalanceTarget sets the replica's target (0: none).
func (m *Metrics) BalanceTarget(n int) { m.balance.target.Set(float64(n)) }

// BalanceRefused counts a new stream refused for balance.
func (m *Metrics) BalanceRefused() { m.balance.refused.Inc() }

// BalanceShed counts a stream shed.
func (m *Metrics) BalanceShed(delta bool) {
	kind := "sotw"
	if delta {
		kind = "delta"
	}
	m.balance.shed.WithLabelValues(kind).Inc()
}
