package ctl

import (
	"strings"
	"testing"
)

// A refusal the server answered with only its first diagnostics is shown
// with the total and how many more there are.
func TestRefusalShowsHowManyMoreProblems(t *testing.T) {
	e := &APIError{Status: "400 Bad Request", Code: 400, Body: []byte(`{"error": "invalid", "diagnostics": [{"file": "a.yaml", "line": 3, "message": "bad port"}], "diagnosticsTotal": 1001}`)}
	got := e.Error()
	if !strings.Contains(got, "1001 problem(s)") || !strings.Contains(got, "a.yaml:3") || !strings.Contains(got, "and 1000 more") {
		t.Errorf("refusal:\n%s", got)
	}
}
