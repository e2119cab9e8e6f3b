package daemon

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// X24_spared_resend_is_synced: a SotW client reconnecting with the version
// it holds is spared the resend; status shows the type SYNCED at that
// version with nothing sent, and the spared counters move by one response
// and its bytes, under the type's short name, while the sent counters stay.
func TestX24_spared_resend_is_synced(t *testing.T) {
	reg := xdstype.New()
	pub := snapshot.NewPublisher()
	snap := xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Endpoints("a", 1), xdstest.Cluster("b"), xdstest.Endpoints("b", 2))
	pub.Publish(snapshot.NewFleet(snap, time.Now()))
	version := snap.Set(xdstype.ClusterURL).Version()
	obs := NewObservability(reg, pub)
	node := xdstest.Node("spared")
	at := time.Now()
	ev := func(k xds.EventKind) xds.Event {
		return xds.Event{Kind: k, StreamID: 7, Node: node, Group: snapshot.DefaultGroup, ADS: true, TypeURL: xdstype.ClusterURL, At: at}
	}
	obs.Observer.Observe(ev(xds.StreamOpened))
	obs.Observer.Observe(ev(xds.Subscribed))
	spared := ev(xds.ResponseSpared)
	spared.Version, spared.Resources, spared.Bytes = version, 2, 321
	obs.Observer.Observe(spared)

	streams := obs.Tracker.Streams()
	if len(streams) != 1 || len(streams[0].Types) != 1 {
		t.Fatalf("streams: %+v", streams)
	}
	ty := streams[0].Types[0]
	if ty.State != status.Synced || ty.Sent == nil || ty.Sent.Version != version || ty.ACKed == nil || ty.ACKed.Version != version || ty.Sent.Nonce != "" {
		t.Fatalf("CDS after a spared resend: state %s, sent %+v, acked %+v; want SYNCED at %s, no nonce", ty.State, ty.Sent, ty.ACKed, version)
	}
	if ty.Sent.Resources != 2 {
		t.Errorf("resources held: %d, want 2", ty.Sent.Resources)
	}
	want := map[string]float64{
		"pylon_xds_resends_spared_total":      1,
		"pylon_xds_resend_bytes_spared_total": 321,
		"pylon_xds_responses_total":           0,
		"pylon_xds_response_bytes_total":      0,
		"pylon_xds_acks_total":                0,
	}
	for name, v := range want {
		if got := counter(t, obs.Metrics.Registry, name, "CDS"); got != v {
			t.Errorf("%s{type=CDS} = %v, want %v", name, got, v)
		}
	}
}

// counter is the value of the counter name{type=typ} (0 if absent).
func counter(t *testing.T, reg *prometheus.Registry, name, typ string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "type") == typ {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
