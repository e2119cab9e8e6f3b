package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/rollout"
)

// pylon rollout against a real serve: status lists nothing without a
// rollout (table and JSON), and an action on a group without one fails,
// saying so.
func TestRolloutCommands(t *testing.T) {
	d := startServe(t)
	if out := d.must(t, "rollout", "status"); !strings.Contains(out, "no rollout in progress") {
		t.Fatalf("rollout status:\n%s", out)
	}
	if out := d.must(t, "rollout", "status", "-o", "json"); !strings.Contains(out, `"rollouts": []`) {
		t.Fatalf("rollout status -o json:\n%s", out)
	}
	for _, act := range []string{"promote", "halt", "resume", "supersede"} {
		code, _, stderr := d.cli("rollout", act, "edge")
		if code == 0 || !strings.Contains(stderr, `group "edge": no rollout`) {
			t.Errorf("rollout %s edge without a rollout: exit %d, %s", act, code, stderr)
		}
	}
	if code, _, stderr := d.cli("rollout", "status", "-o", "xml"); code == 0 || !strings.Contains(stderr, "want table, json or yaml") {
		t.Errorf("rollout status -o xml: exit %d, %s", code, stderr)
	}
}

// The table says each rollout's stage, its versions and what comes next,
// or why it halted.
func TestRolloutTable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	err := rolloutTable(&b, []rollout.Status{
		{Group: "edge", From: "aaa", To: "bbb", Stage: 1, Stages: 3, NextAt: now.Add(90 * time.Second)},
		{Group: "web", From: "ccc", To: "ddd", Stages: 2, Halted: rollout.ReasonNACK, HaltedStage: 1, Detail: `node "w-1" rejected CDS`, Supersede: true},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GROUP", "edge  ", "1/3", "next stage in 1m30s", "0/2", `HALTED at stage 1 (nack): node "w-1" rejected CDS; the next change supersedes it`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
