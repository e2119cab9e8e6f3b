package pipeline

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A refusal of thousands of problems keeps the first MaxDiagnostics in
// the status, /status and /summary (polled every few seconds) and the log
// line, with how many there are in all: the list is the config's, and a
// config may be as large as its source allows.
func TestRefusalKeepsTheFirstDiagnosticsAndTheirCount(t *testing.T) {
	var logs bytes.Buffer
	pub := fleet.NewPublisher()
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(pub), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const n = MaxDiagnostics + 100
	var doc strings.Builder
	doc.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&doc, "- { name: s%d, lb: fastest, endpoints: [{ address: 10.0.0.1, port: 80 }] }\n", i)
	}
	if err := p.Apply(newUpdate("pylon.yaml", []byte(doc.String()))); err == nil {
		t.Fatal("a config of unknown lb policies was accepted")
	}
	r := p.Status().Refused
	if r == nil {
		t.Fatal("no refusal in the status")
	}
	if len(r.Diagnostics) != MaxDiagnostics || r.DiagnosticsTotal < n {
		t.Fatalf("status holds %d diagnostics, total %d; want the first %d and a total of at least %d", len(r.Diagnostics), r.DiagnosticsTotal, MaxDiagnostics, n)
	}
	if strings.Contains(r.Error, fmt.Sprintf("s%d", n-1)) || !strings.Contains(r.Error, "more") {
		t.Errorf("the refusal's message is not bounded (%d bytes)", len(r.Error))
	}
	if logs.Len() > 400*MaxDiagnostics {
		t.Errorf("the refusal's log line is %d bytes", logs.Len())
	}
}
