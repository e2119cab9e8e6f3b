package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/golden"
	"github.com/pylon-xds/pylon/internal/source/file"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// pylon validate on a config some gRPC clients of a group would reject
// lists, per client, each resource and field it rejects with the rule and
// where docs/grpc.md explains it; -o json says the same for scripts.
func TestValidateListsEachRefusingClientWithItsRules(t *testing.T) {
	cfg := filepath.Join("testdata", "grpc_clients_refused.yaml")
	code, out, stderr := run("validate", cfg)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	golden.Check(t, filepath.Join("testdata", "grpc_clients_refused.golden"), stderr, *update)

	code, out, stderr = run("validate", cfg, "-o", "json")
	if code != 1 || !strings.Contains(stderr, "config refused") {
		t.Fatalf("-o json: exit %d, stderr %q", code, stderr)
	}
	golden.Check(t, filepath.Join("testdata", "grpc_clients_refused.json.golden"), out, *update)
	var got validateResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	rules := map[string][]string{}
	for _, c := range got.Clients {
		for _, r := range c.Refusals {
			rules[c.Client] = append(rules[c.Client], r.Rule)
			if r.Docs != "docs/grpc.md#refusals" || r.Group != "apps" || r.File == "" || r.Line == 0 || r.Field == "" {
				t.Errorf("%s: %+v", c.Client, r)
			}
		}
	}
	want := map[string][]string{
		"grpc-go":   {"route-action"},
		"grpc-core": {"cluster-ring-hash-core", "route-action", "cluster-lb-policy"},
		"grpc-js":   {"route-action-nack", "cluster-lb-policy"},
	}
	for client, ids := range want {
		if strings.Join(rules[client], " ") != strings.Join(ids, " ") {
			t.Errorf("%s: rules %v, want %v", client, rules[client], ids)
		}
	}
	if got.OK || len(got.Problems) != 0 {
		t.Errorf("ok %v, problems %v", got.OK, got.Problems)
	}
}

// A problem that is no client's rule is listed as before, ahead of the
// clients'.
func TestValidateKeepsOtherProblemsApartFromTheClients(t *testing.T) {
	code, _, stderr := run("validate", filepath.Join("testdata", "grpc_clients_and_clash.yaml"))
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	other := strings.Index(stderr, `Listener "b": address: 0.0.0.0:9000 (TCP) is also the address`)
	client := strings.Index(stderr, "grpc-js (")
	if other < 0 || client < 0 || other > client {
		t.Errorf("want the other problem, then grpc-js's:\n%s", stderr)
	}
}

// Every refusal the compile's client check writes reads as a client's (the
// compile's own refusal cases): none is left among the other problems.
func TestValidateReadsEveryClientRefusalOfTheCompile(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "compile", "testdata", "compile", "grpc_*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("%v, %d files", err, len(paths))
	}
	read := 0
	for _, p := range paths {
		files, err := file.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = compile.Compile(xdstype.New(), files, nil)
		var problems diag.List
		if !errors.As(err, &problems) {
			continue
		}
		other, clients := byClient(problems)
		for _, d := range other {
			if strings.Contains(d.Message, "(rule ") {
				t.Errorf("%s: not read as a client's: %s", p, d)
			}
		}
		for _, c := range clients {
			read += len(c.Refusals)
		}
	}
	if read == 0 {
		t.Error("no client refusal read")
	}
}
