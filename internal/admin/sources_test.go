package admin

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/source"
)

// /status says what the sources say of themselves (each Kubernetes
// cluster, reachable or not), and nothing without them.
func TestStatusShowsEachKubernetesCluster(t *testing.T) {
	since := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	want := source.Status{Kubernetes: []source.ClusterStatus{
		{Name: "east", Connected: true, Since: since, LastContact: since},
		{Name: "west", Since: since, LastError: "connection refused", LastErrorAt: since},
	}}
	for _, tc := range []struct {
		name    string
		sources func() source.Status
		want    *source.Status
	}{
		{"with", func() source.Status { return want }, &want},
		{"without", nil, nil},
	} {
		h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, Sources: tc.sources}, nil)
		h.src.status = pipeline.Status{Version: "v1"}
		code, body := h.do(t, "GET", "/status", readTok, nil)
		var st struct {
			Sources *source.Status `json:"sources"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
			t.Fatalf("%s: /status: %d %s (%v)", tc.name, code, body, err)
		}
		if d := cmp.Diff(tc.want, st.Sources); d != "" {
			t.Errorf("%s: /status sources (-want +got):\n%s", tc.name, d)
		}
	}
}
