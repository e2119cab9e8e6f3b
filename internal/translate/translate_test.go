package translate_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/golden"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

var update = flag.Bool("update", false, "rewrite testdata/<case>/out.yaml")

// TestGolden compiles testdata/<case>/config.yaml (the model, with any raw
// resources and groups) and compares the Envoy resources of each group, as
// YAML, with out.yaml; or the refusal, for cases that must be refused. The
// compile validates every emitted resource with its ValidateAll and checks
// references, so a golden file only exists for output Envoy accepts. Run
// with -update to rewrite; that also deletes out.yaml of removed cases.
func TestGolden(t *testing.T) {
	cases, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	reg := xdstype.New()
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		dir := filepath.Join("testdata", c.Name())
		t.Run(c.Name(), func(t *testing.T) {
			in := filepath.Join(dir, "config.yaml")
			data, err := os.ReadFile(in)
			if os.IsNotExist(err) {
				if *update {
					os.Remove(filepath.Join(dir, "out.yaml"))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, reg, in, data)
			golden.Check(t, filepath.Join(dir, "out.yaml"), got, *update)
		})
	}
}

func render(t *testing.T, reg *xdstype.Registry, path string, data []byte) string {
	fleet, err := compile.Compile(reg, []config.File{{Path: path, Data: data, Dir: filepath.Dir(path)}}, compile.LimitedReader)
	if err != nil {
		return fmt.Sprintf("# refused\n%s\n", err)
	}
	var b bytes.Buffer
	for _, g := range fleet.Groups() {
		fmt.Fprintf(&b, "# group %s\n", g.Name)
		for _, set := range g.Snapshot.Sets() {
			for _, n := range set.Names() {
				m := redact(set.Get(n).Message)
				js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				y, err := yaml.JSONToYAML(js)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "---\n# %s %s\n%s", set.Type().Kind, n, y)
			}
		}
	}
	return b.String()
}

// redact drops private keys from what the golden files show, as every dump
// must.
func redact(m proto.Message) proto.Message {
	s, ok := m.(*tlsv3.Secret)
	if !ok || s.GetTlsCertificate() == nil {
		return m
	}
	c := proto.Clone(s).(*tlsv3.Secret)
	c.GetTlsCertificate().PrivateKey = nil
	return c
}
