package csds

import (
	"context"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestEntryStates pins the mapping of a tracker type to CSDS's two
// statuses, including what the tracker cannot say: a response sent after
// the ACK and not yet answered is STALE whatever the tracker's state (its
// expected version may not have caught up yet).
func TestEntryStates(t *testing.T) {
	s := New(Options{Tracker: status.NewTracker(status.Options{}), Registry: xdstype.New(), Authorize: func(context.Context) error { return nil }})
	at := time.Unix(1000, 0)
	v := func(version string, sec int64) *status.Stamp {
		return &status.Stamp{Version: version, At: at.Add(time.Duration(sec) * time.Second)}
	}
	cases := []struct {
		name   string
		ty     status.Type
		config statusv3.ConfigStatus
		client adminv3.ClientResourceStatus
	}{
		{"synced", status.Type{Type: "CDS", State: status.Synced, Sent: v("v1", 0), ACKed: v("v1", 1)}, statusv3.ConfigStatus_SYNCED, adminv3.ClientResourceStatus_ACKED},
		{"sent after the ACK", status.Type{Type: "CDS", State: status.Synced, Sent: v("v2", 2), ACKed: v("v1", 1)}, statusv3.ConfigStatus_STALE, adminv3.ClientResourceStatus_REQUESTED},
		{"stale", status.Type{Type: "CDS", State: status.Stale, Sent: v("v2", 2), ACKed: v("v1", 1)}, statusv3.ConfigStatus_STALE, adminv3.ClientResourceStatus_REQUESTED},
		{"nacked", status.Type{Type: "CDS", State: status.Nacked, Sent: v("v2", 2), ACKed: v("v1", 1), LastNACK: &status.NACK{Version: "v1", Detail: "no", At: at.Add(3 * time.Second)}}, statusv3.ConfigStatus_ERROR, adminv3.ClientResourceStatus_NACKED},
		{"not sent", status.Type{Type: "EDS", State: status.NotSent}, statusv3.ConfigStatus_NOT_SENT, adminv3.ClientResourceStatus_REQUESTED},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := s.entry(&c.ty)
			if e.GetConfigStatus() != c.config || e.GetClientStatus() != c.client {
				t.Fatalf("%v / %v, want %v / %v", e.GetConfigStatus(), e.GetClientStatus(), c.config, c.client)
			}
			if want := s.typeURL(c.ty.Type); e.GetTypeUrl() != want || want == c.ty.Type {
				t.Fatalf("type_url %q, want the URL of %s", e.GetTypeUrl(), c.ty.Type)
			}
			if (c.ty.State == status.Nacked) != (e.GetErrorState() != nil) {
				t.Fatalf("error_state %v for state %s", e.GetErrorState(), c.ty.State)
			}
			if es := e.GetErrorState(); es != nil && es.GetVersionInfo() != "v2" {
				t.Fatalf("error_state.version_info %q, want the rejected v2", es.GetVersionInfo())
			}
		})
	}
}
