package config

import (
	"errors"
	"runtime"
	"testing"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// FuzzLoad decodes arbitrary bytes as a config file, YAML or JSON (the
// loader tells them apart), model and raw resources. Invariants: no panic;
// an error is a diag.List whose every diagnostic names the file; what is
// accepted has valid names; memory stays in proportion to the input (an
// alias bomb or a deep nest must not blow up). Seeds: testdata/fuzz/FuzzLoad
// (the examples and tricky cases) plus the ones below.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"resources: []\n",
		`{"resources": []}`,
		"version: 1\nresources:\n- {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, type: STATIC, connect_timeout: 1s}\n",
		`{"resources": [{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "a\u0001", "connect_timeout": "-1s"}]}`,
		"services:\n- {name: web, endpoints: [{address: 10.0.0.1, port: 80}]}\nroutes:\n- {name: r, virtual_hosts: [{name: v, domains: ['*'], routes: [{match: {regex: '(('}, to: [{service: web}]}]}]}\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nresources: [*b]\n",
		"resources:\n- &r {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a}\n- {<<: *r, name: b}\n",
		"version: [1]\n---\nversion: 2\n",
		// A merge that includes the mapping it is in (found by fuzzing: it
		// overflowed the stack).
		"resources:\n- &r {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, <<: *r, name: me}\n",
		"resources:\n- &a {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, b: &b {<<: *a}}\n",
		"groups:\n- {name: g, identities: ['spiffe://td/[']}\n",
		"\xef\xbb\xbf{\"resources\": [1, \"x\", null, {}]}",
		"resources: [{\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener, name: l, \"@ttl\": 5s}]",
	} {
		f.Add([]byte(s))
	}
	reg := xdstype.New()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxFileBytes {
			t.Skip()
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		doc, err := Load(reg, []File{{Path: "fuzz.yaml", Data: data}})
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(200*len(data))+64<<20 {
			t.Errorf("decoding %d bytes allocated %d bytes", len(data), alloc)
		}
		if err != nil {
			var dl diag.List
			if !errors.As(err, &dl) || len(dl) == 0 {
				t.Fatalf("error is not a diag.List: %T %v", err, err)
			}
			for _, d := range dl {
				if d.File != "fuzz.yaml" || d.Message == "" {
					t.Fatalf("diagnostic does not name the file or say what is wrong: %+v", d)
				}
			}
			return
		}
		for _, r := range doc.Resources {
			if r.Name == "" || nameProblem(r.Name) != "" || r.Message == nil {
				t.Fatalf("accepted a resource with a bad name or no message: %q", r.Name)
			}
		}
	})
}
