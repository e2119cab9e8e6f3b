package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestRolloutPolicyDecoded(t *testing.T) {
	src := `groups:
- name: edge
  default: true
  rollout:
    stages: [{selector: {metadata: {canary: "true"}}, bake: 1m}, {share: 10%, bake: 5m}, {share: 50}]
    halt: {on_nack: true, min_nodes: 3, not_acked: {count: 2, within: 2m}}
`
	doc, err := Load(xdstype.New(), []File{{Path: "t.yaml", Data: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	r := doc.Groups[0].Rollout
	if r == nil || len(r.Stages) != 3 || r.Stages[1].Share != 0.1 || r.Stages[2].Share != 0.5 || r.Stages[0].Bake.Std().Minutes() != 1 || r.Halt.NotACKed.Count != 2 || r.Halt.NACKNodes() != 3 {
		t.Fatalf("rollout decoded as %+v", r)
	}
}

// Every mistake in a policy is reported, naming the file, the group and
// the field.
func TestRolloutPolicyErrors(t *testing.T) {
	src := `groups:
- name: edge
  default: true
  rollout:
    stages: [{share: 50%}, {share: 10%}, {bake: 1m}, {share: 5%, selector: {id: "c-*"}}, {selector: {}}, {share: 90%, bake: 900h}]
    halt: {not_acked: {count: 1}, min_nodes: 20000}
- name: web
  match: {id: "w*"}
  rollout: {stages: [{share: 200%}]}
- name: api
  match: {id: "a*"}
  rollout: {stages: []}
`
	_, err := Load(xdstype.New(), []File{{Path: "t.yaml", Data: []byte(src)}})
	var dl diag.List
	if !errors.As(err, &dl) {
		t.Fatalf("got %v, want diagnostics", err)
	}
	got := dl.Error()
	for _, want := range []string{
		`group "edge": rollout.stages[1].share: shares must not shrink`,
		`group "edge": rollout.stages[2]: a stage needs a share`,
		`group "edge": rollout.stages[3]: a stage is a share or a selector, not both`,
		`group "edge": rollout.stages[4].selector: an empty selector`,
		`group "edge": rollout.stages[5].bake: bake time`,
		`group "edge": rollout.halt.not_acked.within: must be a duration`,
		`group "edge": rollout.halt.min_nodes: must be from 1 to 10000`,
		`t.yaml:9: group "web": share: value "200%" is not a share`,
		`group "api": rollout.stages: a rollout needs at least one stage`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "t.yaml:") {
		t.Errorf("diagnostics do not name the file:\n%s", got)
	}
}
