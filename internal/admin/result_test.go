package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/configstore"
)

// writeResult answers exactly what writeJSON would, status, headers and
// bytes, for the results it writes by hand and for those it does not.
func TestWriteResultAsWriteJSON(t *testing.T) {
	for _, res := range []configstore.Result{
		{},
		{Revision: 1},
		{Revision: 123456789},
		{Revision: -4},
		{Revision: 7, Version: "v1-abc.DEF_9:x"},
		{Revision: 7, Version: "a<b&c>"},
		{Revision: 7, Version: `q"uote\\`},
		{Revision: 7, Version: "é"},
		{Revision: 7, Version: "two words"},
		{Revision: 7, Changes: map[string][]string{}},
		{Revision: 7, Changes: map[string][]string{"g": {"+Cluster/web"}}},
		{Revision: 7, DryRun: true},
		{Revision: 7, Recorded: true},
	} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		writeJSON(want, http.StatusOK, res)
		writeResult(got, http.StatusOK, res)
		if want.Code != got.Code || !cmp.Equal(want.Header(), got.Header()) || want.Body.String() != got.Body.String() {
			t.Errorf("%+v: writeResult %d %v %q, writeJSON %d %v %q", res, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}
