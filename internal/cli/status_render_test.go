package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/status"
)

// What a client chose (its node id, a NACK's detail) cannot drive the
// operator's terminal; refused streams are listed; a stream without a
// certificate claiming a certified node's id gets its own row.
func TestProxyTableIsSafeAndComplete(t *testing.T) {
	now := time.Now()
	streams := []fleetStream{
		{Replica: "r", Stream: status.Stream{ID: 1, Node: "edge-1", Group: "g", Identity: "spiffe://td/ns/g/sa/edge-1", Since: now,
			Types: []*status.Type{{Type: "CDS", State: status.Synced}}}},
		{Replica: "r", Stream: status.Stream{ID: 2, Node: "edge-1", Group: "g", Since: now,
			Types: []*status.Type{{Type: "CDS", State: status.Nacked, LastNACK: &status.NACK{Version: "v1", Detail: "bad\x1b[2Jcluster\x07"}}}}},
		{Replica: "r", Stream: status.Stream{ID: 3, Node: "imp\x1b]0;owned\x07", Group: "g", Since: now, Gone: &now,
			Refused: &status.Refusal{Reason: "identity_mismatch", Detail: "node \"imp\" must present ...", At: now}}},
	}
	var out bytes.Buffer
	if err := proxyTable(&out, pipeline.Status{}, streams); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Fatalf("control characters reached the terminal:\n%q", got)
	}
	for _, want := range []string{
		"edge-1 (spiffe://td/ns/g/sa/edge-1)",            // the certified node's own row
		"bad\\x1b[2Jcluster\\a",                          // the NACK detail, escaped
		`imp\x1b]0;owned\a refused at`,                   // the refused stream, escaped
		"(identity_mismatch): node \"imp\" must present", // and why
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^edge-1.*\sg\s`).FindAllString(got, -1)); n != 2 {
		t.Errorf("%d rows for edge-1, want 2 (certified and not):\n%s", n, got)
	}
}

// A type a proxy asks for by name (EDS) lists only what differs from what
// it was sent, never everything else the group has as "not yet sent".
func TestDiffByNameTypes(t *testing.T) {
	raw := func(name, v string) json.RawMessage {
		return json.RawMessage(`{"cluster_name":"` + name + `","v":"` + v + `"}`)
	}
	sent := []json.RawMessage{raw("a", "1")}
	want := []json.RawMessage{raw("a", "2"), raw("b", "1")}
	if got := diff(sent, want, false, nil); len(got) != 1 || !strings.HasPrefix(got[0], "~ a") {
		t.Errorf("by name: %v, want only ~ a", got)
	}
	if got := diff(sent, want, true, nil); len(got) != 2 {
		t.Errorf("full state: %v, want ~ a and + b", got)
	}
}
