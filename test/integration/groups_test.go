package integration

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const groupsConfig = `groups:
- { name: edge, match: { id: "edge-*" } }
services:
- { name: web, endpoints: [{ address: 127.0.0.1, port: 8080 }] }
`

func (p *pylon) proxies(t *testing.T) []status.Stream {
	t.Helper()
	var body struct {
		Streams []status.Stream `json:"streams"`
	}
	if err := json.Unmarshal([]byte(p.get(t, "/proxies")), &body); err != nil {
		t.Fatal(err)
	}
	return body.Streams
}

// A proxy that matches no group connects fine and receives nothing; the
// admin API says so.
func TestNoMatchingGroupIsVisible(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, groupsConfig)
	p := startPylon(t, cfg)
	conn := xdstest.Dial(t, p.xdsAddr)

	edge := xdstest.OpenADS(t, conn, xdstest.Node("edge-1"))
	edge.Request(xdstype.ClusterURL)
	edge.RecvType(xdstype.ClusterURL)
	stray := xdstest.OpenADS(t, conn, xdstest.Node("stray-1"))
	stray.Request(xdstype.ClusterURL)

	want := map[string]string{"edge-1": "edge", "stray-1": status.NoGroup}
	var got map[string]string
	if !eventually(func() bool {
		got = map[string]string{}
		for _, s := range p.proxies(t) {
			got[s.Node] = s.Group
		}
		return got["edge-1"] == want["edge-1"] && got["stray-1"] == want["stray-1"]
	}) {
		t.Fatalf("/proxies groups %v, want %v", got, want)
	}
	// A closed stream stays visible for a while, marked gone, so that a
	// flapping proxy can still be seen.
	stray.Close()
	if !eventually(func() bool {
		for _, s := range p.proxies(t) {
			if s.Node == "stray-1" {
				return s.Gone != nil
			}
		}
		return false
	}) {
		t.Fatal("a closed stream is not shown as gone in /proxies")
	}
}
