package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/pipeline"
)

// A write through the admin API after a quiet spell is published at once,
// not after DebounceQuiet (a minute here): a write is atomic, so there is
// nothing to wait for; only a burst of writes is batched.
func TestAPIWritePublishedWithoutWaitingDebounceQuiet(t *testing.T) {
	r := startDaemon(t, Options{Store: "bolt", DebounceQuiet: time.Minute, DebounceMax: 2 * time.Minute})
	served := func() string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+r.adminAddr+"/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+r.readToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Config pipeline.Status `json:"config"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.Config.Version
	}
	before := served()
	wrote := time.Now()
	newRegistrant(t, r) // applies a service
	for served() == before {
		if time.Since(wrote) > 20*time.Second {
			t.Fatalf("the write was not published within 20s (DebounceQuiet is a minute)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("published %v after the write", time.Since(wrote))
}
