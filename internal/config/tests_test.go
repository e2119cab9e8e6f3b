package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Route tests decode with their file and line, across files, and their
// number is bounded: the limit is accepted, one more is refused naming the
// first test over it.
func TestRouteTestsDecodeAndBound(t *testing.T) {
	doc, err := Load(xdstype.New(), []File{{Path: "a.yaml", Data: []byte(`tests:
- name: one
  node: { id: edge-1, metadata: { tier: gold } }
  request: { method: POST, url: "https://x/y", headers: { x-a: "1" }, port: 8443, sni: x }
  expect: { route: "#2", clusters: { a: 9, b: 1 }, status: 404 }
`)}, {Path: "b.yaml", Data: []byte("tests:\n- { name: two, group: g, request: { url: http://x/ }, expect: { unreachable: true } }\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Tests) != 2 {
		t.Fatalf("%d tests", len(doc.Tests))
	}
	one, two := doc.Tests[0], doc.Tests[1]
	if one.File != "a.yaml" || one.Line != 2 || one.Node.Metadata["tier"] != "gold" || one.Request.Port != 8443 || one.Expect.Clusters["a"] != 9 || one.Expect.Route != "#2" {
		t.Errorf("first test: %+v", one)
	}
	if two.File != "b.yaml" || two.Group != "g" || !two.Expect.Unreachable {
		t.Errorf("second test: %+v", two)
	}

	many := func(n int) []byte {
		var b strings.Builder
		b.WriteString("tests:\n")
		for i := range n {
			fmt.Fprintf(&b, "- { name: t%d, request: { url: http://x/ }, expect: { status: 404 } }\n", i)
		}
		return []byte(b.String())
	}
	if _, err := Load(xdstype.New(), []File{{Path: "many.yaml", Data: many(MaxRouteTests)}}); err != nil {
		t.Fatalf("%d tests refused: %v", MaxRouteTests, err)
	}
	_, err = Load(xdstype.New(), []File{{Path: "many.yaml", Data: many(MaxRouteTests + 1)}})
	want := fmt.Sprintf(`many.yaml:%d: route test "t%d": %d route tests, over the limit of %d`, MaxRouteTests+2, MaxRouteTests, MaxRouteTests+1, MaxRouteTests)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
}
