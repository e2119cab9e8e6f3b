package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gitMetrics are the Git source's. No series exists until the first poll,
// so a Pylon without a Git source shows none (and alerts on them stay
// quiet).
type gitMetrics struct {
	polls *prometheus.CounterVec
	// lastSuccess has no labels; a vector so that it has no series
	// before the first success.
	lastSuccess *prometheus.GaugeVec
	commit      *prometheus.GaugeVec

	mu      sync.Mutex
	current string // the commit label set, "" for none
}

// gitResults are the results a poll is counted by; any other is failed.
var gitResults = map[string]bool{"read": true, "unchanged": true, "bad_commit": true, "failed": true, "timeout": true}

func (m *Metrics) registerGit() {
	m.git.polls = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_git_polls_total",
		Help: "Polls of the Git source (--config-git), by result: read (the ref moved, its commit read), unchanged, bad_commit (refused for what it holds), failed (the host unreachable, the credentials refused, no such ref, a bound crossed), timeout (over --git-timeout).",
	}, []string{"result"}), "pylon_git_polls_total")
	m.git.lastSuccess = register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pylon_git_last_success_timestamp_seconds",
		Help: "When a poll of the Git source last reached the host and found its ref (read, unchanged or bad_commit), in seconds since the epoch.",
	}, nil), "pylon_git_last_success_timestamp_seconds")
	m.git.commit = register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pylon_git_commit_info",
		Help: "1, labelled with the commit the Git source's ref was at when last polled; one series. The commit served is in /status (a commit may be refused).",
	}, []string{"commit"}), "pylon_git_commit_info")
}

// GitPoll counts one poll of the Git source: its result (see
// pylon_git_polls_total) and the commit the ref is at, if it was found.
func (m *Metrics) GitPoll(result, commit string, at time.Time) {
	if !gitResults[result] {
		result = "failed"
	}
	m.git.polls.WithLabelValues(result).Inc()
	if result == "failed" || result == "timeout" {
		return
	}
	m.git.lastSuccess.WithLabelValues().Set(float64(at.Unix()))
	if !isCommit(commit) {
		return
	}
	m.git.mu.Lock()
	defer m.git.mu.Unlock()
	if commit != m.git.current {
		if m.git.current != "" {
			m.git.commit.DeleteLabelValues(m.git.current)
		}
		m.git.commit.WithLabelValues(commit).Set(1)
		m.git.current = commit
	}
}

// isCommit reports whether c is a commit's SHA (SHA-1 or SHA-256, in
// hex): the label's values are commits, never arbitrary text.
func isCommit(c string) bool {
	if len(c) != 40 && len(c) != 64 {
		return false
	}
	for _, r := range c {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}
