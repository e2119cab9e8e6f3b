package configstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Placing the diagnostics of a refused document costs time linear in the
// document, not a parse of the whole document per diagnostic: a client
// sending a large document with a mistake in every object must not buy
// seconds of the server's CPU per request. Every diagnostic still gets
// its field's line.
func TestPlacingDiagnosticsIsLinearInTheDocument(t *testing.T) {
	const n = 800
	var b strings.Builder
	b.WriteString("version: 1\nservices:\n")
	for i := range n {
		fmt.Fprintf(&b, "- name: s%d\n  endpoints:\n  - address: 10.0.0.1\n    port: 80\n", i)
	}
	doc, err := ReadDocument(xdstype.New(), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	list := make(diag.List, n)
	for i := range list {
		list[i] = diag.Diagnostic{File: fmt.Sprintf("services/s%d", i), Field: "endpoints[0].port", Message: "bad port"}
	}
	start := time.Now()
	err = doc.Place(&ValidationError{Err: list}, "big.yaml")
	took := time.Since(start)
	var got diag.List
	if !errors.As(err, &got) || len(got) != n {
		t.Fatalf("placed: %v", err)
	}
	for i, d := range got {
		if want := 3 + 4*i + 3; d.File != "big.yaml" || d.Line != want {
			t.Fatalf("diagnostic %d at %s:%d, want big.yaml:%d", i, d.File, d.Line, want)
		}
	}
	if took > time.Second {
		t.Errorf("placing %d diagnostics in a %d-byte document took %v, want well under a second", n, b.Len(), took)
	}
}
