package rollout_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// canaryConfig is configFor with the first stage picking canaries by
// metadata, as docs/rollouts.md's main example does.
func canaryConfig(version int) string {
	return strings.Replace(configFor(version, time.Hour), "stages: [{share: 30%, bake: 1h0m0s}, {share: 60%, bake: 1h0m0s}]",
		`stages: [{selector: {metadata: {canary: "true"}}, bake: 1h}, {share: 60%, bake: 1h}]`, 1)
}

// Finding 6 of issue 30: a canary chosen by metadata that rejects the
// change halts the rollout. The controller must see the node as the group
// rules do, with its metadata, not the few fields a stream keeps to log.
func TestMetadataCanaryNACKHalts(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	if c := canaryConfig(1); !strings.Contains(c, "canary") {
		t.Fatalf("the canary config did not take the selector:\n%s", c)
	}
	writeConfig(t, cfg, canaryConfig(1))
	p := start(t, cfg, t.TempDir())
	node := xdstest.Node("canary-0")
	node.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"canary": structpb.NewStringValue("true")}}
	canary := &proxy{id: node.Id, s: xdstest.OpenADS(t, p.conn, node)}
	canary.s.Request(xdstype.ClusterURL)
	canary.recv(t, 1)

	writeConfig(t, cfg, canaryConfig(2))
	bad := canary.get(t, 2) // the canary is in the first stage by its metadata
	canary.s.NACK(bad, canary.acked, "cluster web: bad connect_timeout")
	waitUntil(t, "the canary's NACK to halt the rollout", func() bool {
		rs := p.rollouts()
		return len(rs) == 1 && rs[0].Halted == rollout.ReasonNACK
	})
	if s := one(t, p.rollouts()); !strings.Contains(s.Detail, node.Id) {
		t.Fatalf("halted %+v: the detail does not name the canary %s", s, node.Id)
	}
	canary.recv(t, 1) // rolled back
}
