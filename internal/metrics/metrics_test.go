package metrics

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/status/statustest"
)

// Refused streams and ignored requests are counted by reason alone: no
// node, stream or client string ever becomes a label.
func TestRefusedAndIgnored(t *testing.T) {
	m := New(status.NewTracker(status.Options{}))
	m.Refused("identity_mismatch")
	m.Refused("identity_mismatch")
	m.Refused("stalled")
	for range 3 {
		m.Ignored("unknown_type")
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "pylon_xds_streams_refused_total", "pylon_xds_requests_ignored_total":
			for _, mt := range f.GetMetric() {
				key := f.GetName()
				for _, l := range mt.GetLabel() {
					key += " " + l.GetName() + "=" + l.GetValue()
				}
				got[key] = mt.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		"pylon_xds_streams_refused_total reason=identity_mismatch": 2,
		"pylon_xds_streams_refused_total reason=stalled":           1,
		"pylon_xds_requests_ignored_total reason=unknown_type":     3,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("counters (-want +got):\n%s", diff)
	}
}

// gather returns name{labels} -> value for the families named.
func gather(t testing.TB, m *Metrics, names ...string) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = mt.GetGauge().GetValue() + mt.GetCounter().GetValue() + float64(mt.GetHistogram().GetSampleCount())
		}
	}
	return got
}

// Proxies' types are counted by type and state, the state in lower snake
// case: never "NOT SENT" with its space.
func TestProxyTypesByTypeAndState(t *testing.T) {
	tr := status.NewTracker(status.Options{})
	fd := statustest.New(tr)
	m := New(tr)
	now := time.Now()
	for id := range uint64(3) {
		info := status.Info{Node: "n"}
		fd.Seen(id, info, "edge", now)
		tr.Requested(id, info, "CDS", now)
		fd.Expect(id, info, "CDS", "v1", now)
		fd.Sent(id, info, "CDS", status.Stamp{Version: "v1", At: now}, 0, nil, nil)
		tr.Requested(id, info, "EDS", now)
	}
	fd.ACKed(0, status.Info{Node: "n"}, "CDS", status.Stamp{Version: "v1", At: now})
	tr.NACKed(1, status.Info{Node: "n"}, "CDS", status.NACK{Version: "v1", At: now})
	got := gather(t, m, "pylon_proxy_types")
	want := map[string]float64{
		"pylon_proxy_types state=synced type=CDS":   1,
		"pylon_proxy_types state=nacked type=CDS":   1,
		"pylon_proxy_types state=stale type=CDS":    1,
		"pylon_proxy_types state=not_sent type=CDS": 0,
		"pylon_proxy_types state=not_sent type=EDS": 3,
		"pylon_proxy_types state=synced type=EDS":   0,
		"pylon_proxy_types state=nacked type=EDS":   0,
		"pylon_proxy_types state=stale type=EDS":    0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("pylon_proxy_types (-want +got):\n%s", diff)
	}
}

// The last load's result shows as Prometheus shows its own reloads, and a
// refused config stays visible until a load is accepted.
func TestReloadGauges(t *testing.T) {
	m := New(status.NewTracker(status.Options{}))
	names := []string{"pylon_config_last_reload_successful", "pylon_config_last_reload_success_timestamp_seconds", "pylon_config_refused"}
	at := time.Unix(1_700_000_000, 0)
	m.PublishAt("published", at)
	m.PublishAt("refused", at.Add(time.Minute))
	want := map[string]float64{names[0]: 0, names[1]: 1_700_000_000, names[2]: 1}
	if diff := cmp.Diff(want, gather(t, m, names...)); diff != "" {
		t.Fatalf("after a refused load (-want +got):\n%s", diff)
	}
	m.PublishAt("unchanged", at.Add(2*time.Minute))
	want = map[string]float64{names[0]: 1, names[1]: 1_700_000_120, names[2]: 0}
	if diff := cmp.Diff(want, gather(t, m, names...)); diff != "" {
		t.Fatalf("after an accepted load (-want +got):\n%s", diff)
	}
}

// pylon_build_info says which build runs.
func TestBuildInfo(t *testing.T) {
	m := New(status.NewTracker(status.Options{}))
	got := gather(t, m, "pylon_build_info")
	if len(got) != 1 {
		t.Fatalf("pylon_build_info: %v", got)
	}
	for k, v := range got {
		if v != 1 || !strings.Contains(k, "goversion="+runtime.Version()) || !strings.Contains(k, " version=") || !strings.Contains(k, " revision=") {
			t.Fatalf("pylon_build_info: %s = %v", k, v)
		}
	}
}

// Names lists every family a scrape can show, including those with no
// sample yet, and nothing else.
func TestNames(t *testing.T) {
	tr := status.NewTracker(status.Options{})
	fd := statustest.New(tr)
	m := New(tr)
	names := m.Names()
	for _, want := range []string{"pylon_push_latency_seconds", "pylon_first_sync_seconds", "pylon_proxy_types", "pylon_build_info",
		"pylon_config_refused", "pylon_config_last_reload_successful", "pylon_config_last_reload_success_timestamp_seconds", "go_goroutines"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() lacks %s", want)
		}
	}
	// Every family a busy server exports is named.
	tr.Requested(1, status.Info{Node: "n"}, "CDS", time.Now())
	fd.Sent(1, status.Info{Node: "n"}, "CDS", status.Stamp{Version: "v1", At: time.Now()}, 10, nil, nil)
	fd.ACKed(1, status.Info{Node: "n"}, "CDS", status.Stamp{Version: "v1", At: time.Now()})
	m.StreamOpened("ads")
	m.NACK("CDS")
	m.Latency("CDS", time.Second)
	m.FirstSync("CDS", time.Second)
	m.Publish("published")
	m.SourceEvent()
	m.Reload()
	m.Refused("stalled")
	m.Ignored("unknown_type")
	m.ConnectionClosed("evicted")
	m.Spared("CDS", 10)
	m.RolloutStage("edge", 2)
	m.RolloutHalt("edge", "nack")
	m.BalanceShed(true)
	m.KubeCluster("east", true, time.Now())
	m.KubeClusterDegraded("east", false)
	m.CertificateExpiry(CertServer, func() (time.Time, bool) { return time.Now(), true })
	m.GitPoll("read", strings.Repeat("a", 40), time.Now())
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var gathered []string
	for _, f := range families {
		gathered = append(gathered, f.GetName())
	}
	if diff := cmp.Diff(names, gathered); diff != "" {
		t.Fatalf("Names() against a scrape of every metric (-names +scrape):\n%s", diff)
	}
}

// BenchmarkScrape is a whole /metrics gather at 100 and 10,000 streams:
// the proxies-by-state gauges read counters, so the figures match.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprint(n, "streams"), func(b *testing.B) {
			tr := status.NewTracker(status.Options{})
			fd := statustest.New(tr)
			now := time.Now()
			for id := range uint64(n) {
				info := status.Info{Node: fmt.Sprint("n", id)}
				fd.Seen(id, info, "g", now)
				for _, u := range []string{"CDS", "EDS", "LDS", "RDS"} {
					fd.Expect(id, info, u, "v1", now)
					fd.Sent(id, info, u, status.Stamp{Version: "v1", At: now}, 0, nil, nil)
				}
			}
			m := New(tr)
			for b.Loop() {
				if _, err := m.Registry.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
