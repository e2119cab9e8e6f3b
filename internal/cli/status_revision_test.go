package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/pipeline"
)

// pylon status names the source's revision being served (a Git commit)
// and a refused one's; without a revision it says nothing of one.
func TestStatusNamesTheRevision(t *testing.T) {
	at := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		cfg  pipeline.Status
		want []string
		not  string
	}{
		{"served", pipeline.Status{Version: "v1", Revision: "1111aaaa"}, []string{"Serving revision 1111aaaa (config version v1)"}, "REFUSED"},
		{"refused", pipeline.Status{Version: "v1", Revision: "1111aaaa", Refused: &pipeline.Refusal{At: at, Revision: "2222bbbb", Error: "bad"}},
			[]string{"CONFIG REFUSED at 2026-12-06T19:00:00Z (revision 2222bbbb): still serving the previous config, version v1 (revision 1111aaaa)"}, ""},
		{"no revision", pipeline.Status{Version: "v1", Refused: &pipeline.Refusal{At: at, Error: "bad"}},
			[]string{"CONFIG REFUSED at 2026-12-06T19:00:00Z: still serving the previous config, version v1\n"}, "revision"},
	} {
		var out bytes.Buffer
		writeServing(&out, tc.cfg)
		writeRefusal(&out, tc.cfg)
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: status lacks %q:\n%s", tc.name, w, out.String())
			}
		}
		if tc.not != "" && strings.Contains(out.String(), tc.not) {
			t.Errorf("%s: status shows %q:\n%s", tc.name, tc.not, out.String())
		}
	}
}
