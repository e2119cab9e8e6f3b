package relay

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

func TestKeyTemplateRefusesWhatIsNotAKey(t *testing.T) {
	for tmpl, want := range map[string]string{
		"{id}":                     "per proxy",
		"{cluster}/{id}":           "per proxy",
		"{node.cluster}":           "not a key field",
		"{cluster":                 "not closed",
		"static":                   "names no node field",
		"{metadata.}":              "not a key field",
		"{locality.planet}":        "not a key field",
		"{cluster}{metadata.role}": "nothing between",
	} {
		_, err := ParseTemplate(tmpl)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tmpl) {
			t.Errorf("ParseTemplate(%q) = %v, want an error naming the template and saying %q", tmpl, err, want)
		}
	}
}

func TestKeyOfReadsTheTemplatesNodeFields(t *testing.T) {
	tmpl, err := ParseTemplate("{cluster}/{locality.zone}/{metadata.role}")
	if err != nil {
		t.Fatal(err)
	}
	n := nodegroup.Node{ID: "p1", Cluster: "prod", Zone: "z1", Metadata: map[string]string{"role": "edge", "other": "x"}}
	k, err := tmpl.KeyOf(n)
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "prod/z1/edge" {
		t.Errorf("key %q, want prod/z1/edge", k.Name)
	}
	want := nodegroup.Match{Cluster: "prod", Zone: "z1", Metadata: map[string]string{"role": "edge"}}
	if diff := cmp.Diff(want, k.Match()); diff != "" {
		t.Errorf("match (-want +got):\n%s", diff)
	}
	if !k.Match().Matches(n) {
		t.Error("the key's group rule does not take the node it was made from")
	}
	up := k.Node("relay-h")
	if up.GetId() != "relay-h/prod/z1/edge" || up.GetCluster() != "prod" || up.GetLocality().GetZone() != "z1" || up.GetMetadata().GetFields()["role"].GetStringValue() != "edge" {
		t.Errorf("upstream node %v, want the key's fields and id relay-h/prod/z1/edge", up)
	}
}

// An empty field would make a group rule that takes every other key's
// nodes: such a node is refused, named, with the field it lacks.
func TestKeyOfRefusesANodeWithoutAKeyField(t *testing.T) {
	tmpl, _ := ParseTemplate("{cluster}-{metadata.role}")
	_, err := tmpl.KeyOf(nodegroup.Node{ID: "p1", Cluster: "prod"})
	if err == nil || !strings.Contains(err.Error(), `"p1"`) || !strings.Contains(err.Error(), "metadata.role") {
		t.Fatalf("KeyOf = %v, want an error naming the node and metadata.role", err)
	}
}

// Different field values make different keys: a value holding the
// template's separator cannot pass for another node's fields (a proxy
// could otherwise take, or squat, another key's name and starve its
// proxies of config).
func TestKeyOfKeepsDifferentValuesApart(t *testing.T) {
	tmpl, err := ParseTemplate("{cluster}/{metadata.role}")
	if err != nil {
		t.Fatal(err)
	}
	a, err := tmpl.KeyOf(nodegroup.Node{ID: "attacker", Cluster: "a/b", Metadata: map[string]string{"role": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tmpl.KeyOf(nodegroup.Node{ID: "real", Cluster: "a", Metadata: map[string]string{"role": "b/c"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name == b.Name {
		t.Fatalf("cluster a/b role c and cluster a role b/c make one key %q", a.Name)
	}
	if a.Name != "a%2Fb/c" || b.Name != "a/b%2Fc" {
		t.Errorf("keys %q and %q, want a%%2Fb/c and a/b%%2Fc", a.Name, b.Name)
	}
	pct, _ := tmpl.KeyOf(nodegroup.Node{ID: "p", Cluster: "a%2Fb", Metadata: map[string]string{"role": "c"}})
	if pct.Name == a.Name {
		t.Errorf("a value spelling the escape makes the escaped key %q", pct.Name)
	}
}
