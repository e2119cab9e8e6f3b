package matrix

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// haltBound bounds the wait for a halt that a counted NACK must cause
// (at once, but CI runs the whole suite at once on two cores).
const haltBound = 10 * time.Second

// halt brings the rollouts to a halt, the way an attacker and a real
// canary would try first: at stage 2 (the share stage), a client without
// a certificate claiming a node id of that stage NACKs the new version,
// which must not halt anything (finding 3); then a verified canary chosen
// by metadata alone NACKs it, which must (finding 6), its error quoting a
// private key, which the log must not (finding 8). A halt by the first is
// resumed, so that the second is tried on its own. Whatever did not halt
// is then halted by the admin API, on every replica (each runs its own
// copy of a rollout).
func (f *fleet) halt(t *testing.T) {
	t.Helper()
	for _, r := range f.reps {
		for _, g := range []string{"vault", "edge"} {
			r.write(t, "POST", "/v1/rollouts/"+g+"/promote", "")
		}
	}
	f.nacks(t)
	f.haltAll(t)
}

// nacks has two clients of the first replica NACK the new version: one
// without a certificate, which must not halt the rollout, then a canary
// chosen by metadata, which must. It runs on the setup's own t, so that
// the two streams stay open for the dumps, which then show their NACKs.
func (f *fleet) nacks(t *testing.T) {
	r := f.reps[0]
	// An id in the share stage, and one only metadata puts there.
	unverified := client{id: pick("nack-anon", func(s float64) bool { return s < 0.5 })}
	canary := client{id: pick("nack-canary", func(s float64) bool { return s >= 0.5 }), canary: true}
	canary.cert = f.cert(t, canary.id)

	u := xdstest.OpenADS(t, f.dial(t, r, unverified), unverified.node())
	resp := newCluster(t, u)
	u.NACK(resp, "", "rejected by a client without a certificate")
	waitUntil(t, "the unverified client's NACK recorded", func() bool {
		return strings.Contains(r.get(t, "/proxies/"+unverified.id), `"lastNack"`)
	})
	if s := r.rolloutOf(t, "edge"); s == nil || s.Halted != "" {
		t.Errorf("finding 3: a NACK from a client without a certificate halted the rollout: %+v", s)
		// Resumed at stage 2, so that the canary's NACK is tried
		// on its own.
		r.write(t, "POST", "/v1/rollouts/edge/resume", "")
	}

	c := xdstest.OpenADS(t, f.dial(t, r, canary), canary.node())
	resp = newCluster(t, c)
	c.NACK(resp, "", "rejected; the key it holds: "+f.ms["restricted"].keyPEM)
	deadline := time.Now().Add(haltBound)
	var s *rollout.Status
	for s = r.rolloutOf(t, "edge"); s != nil && s.Halted == "" && time.Now().Before(deadline); s = r.rolloutOf(t, "edge") {
		time.Sleep(20 * time.Millisecond)
	}
	switch {
	case s == nil:
		t.Errorf("the edge rollout is gone")
	case s.Halted == "":
		t.Errorf("finding 6: a NACK by a canary chosen by metadata (%s) did not halt the rollout within %v: %+v", canary.id, haltBound, s)
	case !strings.Contains(s.Detail, canary.id) || strings.Contains(s.Detail, unverified.id):
		t.Errorf("finding 3: the halt is not the verified canary's: %+v", s)
	}
}

// haltAll halts, through the admin API, every rollout of every replica
// not halted yet, and waits until each is.
func (f *fleet) haltAll(t *testing.T) {
	t.Helper()
	for _, r := range f.reps {
		for _, g := range []string{"vault", "edge"} {
			if s := r.rolloutOf(t, g); s != nil && s.Halted == "" {
				if code, body := r.call(t, r.writeTok, "POST", "/v1/rollouts/"+g+"/halt", ""); code != http.StatusOK {
					t.Fatalf("%s: halt %s: %d %s", r.name, g, code, body)
				}
			}
			waitUntil(t, r.name+": "+g+" halted", func() bool {
				s := r.rolloutOf(t, g)
				return s != nil && s.Halted != ""
			})
		}
	}
}

// pick returns the first of prefix-0, prefix-1, ... whose share passes.
func pick(prefix string, ok func(float64) bool) string {
	for i := range 1000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if ok(nodegroup.NodeShare(id)) {
			return id
		}
	}
	panic("no id found for " + prefix)
}

// newCluster subscribes s to the clusters and returns the response,
// which must be the new version (web at 2s).
func newCluster(t *testing.T, s *xdstest.Stream) *discoveryv3.DiscoveryResponse {
	t.Helper()
	s.Request(xdstype.ClusterURL)
	resp := s.RecvType(xdstype.ClusterURL)
	for _, a := range resp.Resources {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if c.GetName() == "web" && c.GetConnectTimeout().AsDuration() != 2*time.Second {
			t.Errorf("a node of stage 2 was sent web at %v, want the new version's 2s", c.GetConnectTimeout().AsDuration())
		}
	}
	return resp
}
