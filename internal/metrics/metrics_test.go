package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
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
