package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A refused document with a mistake in each of thousands of objects is
// answered with the first maxDiagnostics diagnostics and their total, not
// all of them: the answer stays bounded whatever the document.
func TestRefusalAnswersTheFirstDiagnosticsAndTheirTotal(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	const n = maxDiagnostics + 100
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&b, "- name: s%d\n  endpoints:\n  - address: 10.0.0.1\n    port: 70000\n", i)
	}
	code, body := h.do(t, "POST", "/v1/apply?dryRun=true&file=big.yaml", writeTok, []byte(b.String()))
	var res struct {
		Diagnostics      []json.RawMessage `json:"diagnostics"`
		DiagnosticsTotal int               `json:"diagnosticsTotal"`
	}
	if code != http.StatusBadRequest || json.Unmarshal([]byte(body), &res) != nil {
		t.Fatalf("apply: %d %.300s", code, body)
	}
	if len(res.Diagnostics) != maxDiagnostics || res.DiagnosticsTotal != n {
		t.Errorf("%d diagnostics, total %d; want the first %d, total %d", len(res.Diagnostics), res.DiagnosticsTotal, maxDiagnostics, n)
	}
}
