package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	rolloutctl "github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// rollingController is a real controller with group "edge" rolling from
// one snapshot to another (stage 1 of 2, long bakes; Run is not needed).
func rollingController(t *testing.T) *rolloutctl.Controller {
	t.Helper()
	policy := &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.1, Bake: nodegroup.Duration(time.Hour)}, {Share: 0.5, Bake: nodegroup.Duration(time.Hour)}}}
	c, err := rolloutctl.New(rolloutctl.Options{Publisher: fleet.NewPublisher()})
	if err != nil {
		t.Fatal(err)
	}
	for _, timeout := range []time.Duration{time.Second, 2 * time.Second} {
		reg := xdstype.New()
		cl := &clusterv3.Cluster{Name: "a", ConnectTimeout: durationpb.New(timeout), ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
		s, err := snapshot.Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.ClusterURL), Name: "a", Message: cl}})
		if err != nil {
			t.Fatal(err)
		}
		f := fleet.NewGroupedFleet(nodegroup.Groups{{Name: "edge", Default: true, Rollout: policy}}, []*snapshot.Snapshot{s})
		if _, err := c.Publish(f, []config.File{{Path: "c.yaml", Data: []byte(timeout.String())}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// The rollout actions need the write token; reads the read token. Each
// action answers the rollout's new state, 404 for a group without a
// rollout, 409 for what its state does not allow.
func TestRolloutActions(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, Rollouts: rollingController(t)}, nil)
	if code, _ := h.do(t, "POST", "/v1/rollouts/edge/promote", readTok, nil); code != http.StatusUnauthorized {
		t.Fatalf("promote with the read token: %d, want 401", code)
	}
	if code, body := h.do(t, "GET", "/v1/rollouts", readTok, nil); code != http.StatusOK || !strings.Contains(body, `"stage": 1`) {
		t.Fatalf("GET /v1/rollouts: %d %s", code, body)
	}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/rollouts/edge/promote", 200, `"stage": 2`},
		{"/v1/rollouts/edge/halt", 200, `"halted": "operator"`},
		{"/v1/rollouts/edge/promote", 409, "resume it first"},
		{"/v1/rollouts/web/halt", 404, `group \"web\": no rollout`},
		{"/v1/rollouts/edge/explode", 404, "unknown rollout action"},
		{"/v1/rollouts/edge/resume", 200, `"stage": 2`},
		{"/v1/rollouts/edge/resume", 409, "not halted"},
	} {
		if code, body := h.do(t, "POST", c.path, writeTok, nil); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("POST %s: %d %s, want %d with %s", c.path, code, body, c.code, c.want)
		}
	}
	if code, body := h.do(t, "GET", "/status", readTok, nil); code != http.StatusOK || !strings.Contains(body, `"stagedRollouts": [`) {
		t.Errorf("GET /status does not show the rollout: %d %s", code, body)
	}
}

// While a rollout is halted, config writes that change its group are
// refused with 409 naming the group, once compiled (the store's gate),
// unless they say ?supersede=true; dry runs pass. Writes to other groups
// pass too (the gate is rollout.Controller.Check:
// TestHaltInOneGroupDoesNotBlockAnother).
func TestWritesRefusedWhileHalted(t *testing.T) {
	ctrl := rollingController(t)
	h := newHarness(t, Options{Token: writeTok, Rollouts: ctrl}, nil)
	doc := []byte(`{"groups": [{"name": "edge", "default": true}], "services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 80}]}]}`)
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, doc); code != http.StatusOK {
		t.Fatalf("apply while rolling (not halted): %d %s", code, body)
	}
	if _, err := ctrl.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	// A write while halted must change something: one that changes
	// nothing stores nothing and has nothing to gate.
	doc = []byte(strings.Replace(string(doc), `"port": 80`, `"port": 81`, 1))
	code, body := h.do(t, "POST", "/v1/apply", writeTok, doc)
	if code != http.StatusConflict || !strings.Contains(body, `group \"edge\": rollout halted at stage 1 (operator)`) || !strings.Contains(body, "supersede=true") {
		t.Fatalf("apply while halted: %d %s, want 409 naming the group and how to supersede", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/apply?dryRun=true", writeTok, doc); code != http.StatusOK {
		t.Fatalf("dry run while halted: %d %s", code, body)
	}
	// Endpoints are not rolled out: registering, renewing and removing
	// one goes on while a rollout is halted.
	ep := []byte(`{"address": "10.0.0.2", "port": 80, "ttl": "30s"}`)
	for range 2 {
		if code, body := h.do(t, "POST", "/v1/services/web/endpoints", writeTok, ep); code != http.StatusOK {
			t.Fatalf("endpoint registration while halted: %d %s", code, body)
		}
	}
	if code, body := h.do(t, "DELETE", "/v1/services/web/endpoints/10.0.0.2:80", writeTok, nil); code != http.StatusOK {
		t.Fatalf("endpoint removal while halted: %d %s", code, body)
	}
	// A superseding write that is refused supersedes nothing: the next
	// plain write is still refused.
	bad := []byte(`{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.9", "port": 70000}]}]}`)
	if code, body := h.do(t, "POST", "/v1/apply?supersede=true", writeTok, bad); code != http.StatusBadRequest {
		t.Fatalf("an invalid superseding apply: %d %s, want 400", code, body)
	}
	if s := ctrl.Status(); len(s) != 1 || s[0].Supersede || len(ctrl.Halted()) != 1 {
		t.Fatalf("after a refused superseding write: %+v, want still halted, not superseded", s)
	}
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, doc); code != http.StatusConflict {
		t.Fatalf("a plain write after a refused superseding one: %d %s, want 409", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/apply?supersede=true", writeTok, doc); code != http.StatusOK {
		t.Fatalf("superseding apply: %d %s", code, body)
	}
	if s := ctrl.Status(); len(s) != 1 || !s[0].Supersede || len(ctrl.Halted()) != 0 {
		t.Fatalf("after a superseding write: %+v", s)
	}
}
