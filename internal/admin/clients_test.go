package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestStatusWarnsOfConnectedClientsAGroupDoesNotState: GET /status lists
// status.ClientWarnings of the fleet served and the proxies connected: a
// group stating [grpc-go] with a grpc-js client connected is named, with
// the client; a group whose clients are all stated is not.
func TestStatusWarnsOfConnectedClientsAGroupDoesNotState(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	empty, err := snapshot.Build(xdstype.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.src.fleet = fleet.NewGroupedFleet(nodegroup.Groups{
		{Name: "web", Clients: []string{"grpc-go"}},
		{Name: "api", Clients: []string{"grpc-go"}, Default: true},
	}, []*snapshot.Snapshot{empty, empty})
	now := time.Now()
	h.src.streams = []status.Stream{
		{Node: "w1", Group: "web", Client: "gRPC Node Pure JS 1.14.1", Since: now},
		{Node: "a1", Group: "api", Client: "gRPC Go 1.85.0", Since: now},
	}
	code, body := h.do(t, "GET", "/status", readTok, nil)
	if code != 200 {
		t.Fatalf("GET /status: %d %s", code, body)
	}
	var got struct {
		Clients []string `json:"clientWarnings"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{`group "web" states clients [grpc-go] but grpc-js 1.14.1 is connected: what it receives is not checked against what those accept; add them to ` + "`clients:`"}
	if diff := cmp.Diff(want, got.Clients); diff != "" {
		t.Errorf("clientWarnings (-want +got):\n%s", diff)
	}
}
