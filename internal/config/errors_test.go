package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Decoding errors speak the config's language (never a Go type name such
// as *nodegroup.Duration), name the field even when the value's own parser
// failed, and report every mistake in an object, not the first only.
func TestModelDecodingErrors(t *testing.T) {
	src := `services:
- name: web
  connect_timeout: [1]
  endpoints: [{address: 10.0.0.1, port: "x"}]
- name: web2
  connect_timeout: fast
  lb: 5
  endpoints: [{address: 10.0.0.1, port: 80}]
  tyop: 1
- name: web3
  endpoints: {address: 10.0.0.1}
`
	_, err := Load(xdstype.New(), []File{{Path: "t.yaml", Data: []byte(src)}})
	var dl diag.List
	if !errors.As(err, &dl) {
		t.Fatalf("got %v, want diagnostics", err)
	}
	var got []string
	for _, d := range dl {
		got = append(got, d.String())
	}
	want := []string{
		`t.yaml:3: service "web": connect_timeout: expected a duration such as "1.5s", got a list`,
		`t.yaml:4: service "web": endpoints.port: expected a whole number, 0 or more, got a string`,
		`t.yaml:6: service "web2": connect_timeout: value "fast" is not a duration (write it like "1.5s" or "250ms")`,
		`t.yaml:7: service "web2": lb: expected a string, got a number`,
		`t.yaml:9: service "web2": tyop: unknown field "tyop"`,
		`t.yaml:11: service "web3": endpoints: expected a list, got a mapping`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("diagnostics (-want +got):\n%s", diff)
	}
	for _, g := range got {
		if strings.Contains(g, "model.") || strings.Contains(g, "nodegroup.") || strings.Contains(g, "uint32") || strings.Contains(g, "time:") {
			t.Errorf("a Go name reached the operator: %s", g)
		}
	}
}

// A merge key that reaches the mapping it is written in would recurse
// forever (the fuzzer found it overflowing the stack): it is refused.
func TestSelfMergeRefused(t *testing.T) {
	for _, src := range []string{
		"resources:\n- &r {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, <<: *r, name: me}\n",
		"resources:\n- &a {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, b: &b {<<: *a}}\n",
		"services:\n- &s {name: web, endpoints: [], <<: [*s]}\n",
	} {
		_, err := Load(xdstype.New(), []File{{Path: "t.yaml", Data: []byte(src)}})
		if err == nil || !strings.Contains(err.Error(), "includes the mapping it is in") {
			t.Errorf("%q: got %v", src, err)
		}
	}
}
