package surface

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/compile"
	pconfig "github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// exampleBlock is a fenced YAML block of docs/types.md starting with
// "# example: ABBREV".
var exampleBlock = regexp.MustCompile("(?s)```yaml\n# example: ([A-Z]+)\n(.*?)```")

// Every example in docs/types.md is a config Pylon accepts, and serves a
// resource of the type it illustrates.
func TestDocsTypesExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/types.md")
	if err != nil {
		t.Fatal(err)
	}
	reg := xdstype.New()
	seen := map[string]bool{}
	for _, m := range exampleBlock.FindAllStringSubmatch(string(doc), -1) {
		abbrev, body := m[1], m[2]
		seen[abbrev] = true
		var typ *xdstype.Type
		for _, ty := range reg.Ranked() {
			if ty.Abbrev == abbrev {
				typ = ty
			}
		}
		if typ == nil {
			t.Errorf("example %s: no such type", abbrev)
			continue
		}
		fleet, err := compile.Compile(reg, []pconfig.File{{Path: "types-" + strings.ToLower(abbrev) + ".yaml", Data: []byte(body)}}, nil)
		if err != nil {
			t.Errorf("example %s: %v", abbrev, err)
			continue
		}
		for _, g := range fleet.Groups() {
			if g.Snapshot.Set(typ.URL).Len() == 0 {
				t.Errorf("example %s: group %s serves no %s", abbrev, g.Name, typ.Kind)
			}
		}
	}
	for _, want := range []string{"ECDS", "RTDS", "SRDS", "VHDS"} {
		if !seen[want] {
			t.Errorf("docs/types.md has no %s example", want)
		}
	}
}
