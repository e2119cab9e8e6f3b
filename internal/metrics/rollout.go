package metrics

import "github.com/prometheus/client_golang/prometheus"

// rolloutMetrics are the staged rollouts': labels are the group (the
// config's groups, bounded by it) and the halt reason (a fixed few).
type rolloutMetrics struct {
	stage *prometheus.GaugeVec
	halts *prometheus.CounterVec
}

func (m *Metrics) registerRollout() {
	m.rollout.stage = register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pylon_rollout_stage", Help: "The stage of each group's rollout in progress (1 the first; 0 halted); no series without a rollout.",
	}, []string{"group"}), "pylon_rollout_stage")
	m.rollout.halts = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_rollout_halts_total", Help: "Rollouts halted, by group and reason (nack, not_acked, operator).",
	}, []string{"group", "reason"}), "pylon_rollout_halts_total")
}

// RolloutStage sets a group's rollout stage (0: halted); a negative stage
// says the rollout ended, and removes the group's series, so that a group
// gone from the config leaves none behind.
func (m *Metrics) RolloutStage(group string, stage int) {
	if stage < 0 {
		m.rollout.stage.DeleteLabelValues(group)
		return
	}
	m.rollout.stage.WithLabelValues(group).Set(float64(stage))
}

// RolloutHalt counts a halted rollout.
func (m *Metrics) RolloutHalt(group, reason string) {
	m.rollout.halts.WithLabelValues(group, reason).Inc()
}
