package main

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// refusals reads the streams a Pylon server refused so far, by reason
// (pylon_xds_streams_refused_total), from its metrics; nil where the
// server has none (go-control-plane).
func refusals(c *child) map[string]float64 {
	resp, err := http.Get("http://" + c.ctl + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, m := range fams["pylon_xds_streams_refused_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// ended says how many streams the server ended during a step and why:
// what the simulated proxies retried, and the server's refusals by reason
// (after less before); "" when there were none. A reconnect that takes
// far longer than usual shows here whether refused streams came back for
// more (each retry resends its whole initial request).
func ended(retries int64, before, after map[string]float64) string {
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(after)) {
		if n := after[reason] - before[reason]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", reason, n))
		}
	}
	if retries == 0 && len(parts) == 0 {
		return ""
	}
	s := fmt.Sprintf("; %d retried", retries)
	if len(parts) > 0 {
		s += ", refused " + strings.Join(parts, ", ")
	}
	return s
}
