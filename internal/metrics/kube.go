package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// kubeMetrics are the Kubernetes source's clusters: the cluster label
// takes only the names the operator configured (--kube-cluster, and the
// --kubeconfig cluster's), so it stays bounded.
type kubeMetrics struct {
	up, lastContact, degraded *prometheus.GaugeVec
}

func (m *Metrics) registerKube() {
	m.kube.up = register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pylon_kube_cluster_up",
		Help: "Whether a Kubernetes cluster's API server answered the source's last probe (1) or not (0): away, its last services and endpoints keep being served.",
	}, []string{"cluster"}), "pylon_kube_cluster_up")
	m.kube.lastContact = register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pylon_kube_last_sync_timestamp_seconds",
		Help: "When a Kubernetes cluster last answered the source (its caches' listing, or a probe while its watches are open), in Unix seconds.",
	}, []string{"cluster"}), "pylon_kube_last_sync_timestamp_seconds")
	m.kube.degraded = register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pylon_kube_cluster_degraded",
		Help: "Whether a reachable Kubernetes cluster refuses the source's lists or watches (1: RBAC, say; its last services and endpoints keep being served) or not (0).",
	}, []string{"cluster"}), "pylon_kube_cluster_degraded")
}

// KubeClusterDegraded records whether a reachable cluster refuses the
// source's lists or watches; cluster must be a configured cluster's name.
func (m *Metrics) KubeClusterDegraded(cluster string, degraded bool) {
	v := 0.0
	if degraded {
		v = 1
	}
	m.kube.degraded.WithLabelValues(cluster).Set(v)
}

// KubeCluster records a cluster's state; cluster must be a configured
// cluster's name.
func (m *Metrics) KubeCluster(cluster string, up bool, lastContact time.Time) {
	v := 0.0
	if up {
		v = 1
	}
	m.kube.up.WithLabelValues(cluster).Set(v)
	if !lastContact.IsZero() {
		m.kube.lastContact.WithLabelValues(cluster).Set(float64(lastContact.UnixNano()) / 1e9)
	}
}
