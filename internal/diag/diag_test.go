package diag_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const key = `-----BEGIN PRIVATE KEY-----\nMIIE-MARKER-DIAG\n-----END PRIVATE KEY-----\n`

// TestDecodingErrorsDoNotEchoKeys reproduces the echo through the real
// decoder: protojson quotes a refused value, here a PEM key given as
// inlineBytes (not base64) and as a string where a DataSource goes.
func TestDecodingErrorsDoNotEchoKeys(t *testing.T) {
	for _, doc := range []string{
		`{"resources":[{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s","tlsCertificate":{"privateKey":{"inlineBytes":"` + key + `"}}}]}`,
		`{"resources":[{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s","tlsCertificate":{"privateKey":"` + key + `"}}]}`,
	} {
		_, err := config.Load(xdstype.New(), []config.File{{Path: "x.json", Data: []byte(doc)}})
		var dl diag.List
		if !errors.As(err, &dl) {
			t.Fatalf("want a diag.List, got %v", err)
		}
		js, _ := json.Marshal(dl)
		for what, out := range map[string]string{"error": err.Error(), "json": string(js), "field": dl[0].Message} {
			if strings.Contains(out, "MARKER") {
				t.Errorf("%s echoes the key: %s", what, out)
			}
			// The decoder says what is wrong without quoting the value
			// (config's TestRefusedValueNeverQuoted); diag's scrubbing is
			// the second line of defence (TestRenderingRedacts).
			if !strings.Contains(out, "privateKey") && !strings.Contains(out, "inlineBytes") && what != "field" {
				t.Errorf("%s lost the field it names: %s", what, out)
			}
		}
		if !strings.Contains(err.Error(), `Secret "s"`) {
			t.Errorf("the error lost what it names: %v", err)
		}
	}
}

// TestRenderingRedacts covers a diagnostic built by hand and never passed
// through Err: String and JSON scrub it anyway.
func TestRenderingRedacts(t *testing.T) {
	d := diag.Diagnostic{File: "f", Type: "Cluster", Name: "c", Field: "x", Message: "bad value " + key,
		Refusal: &diag.Refusal{Clients: []string{"grpc-go"}, Group: "g", Rule: "r", Effect: "NACK", Detail: "bad value " + key}}
	js, _ := json.Marshal(diag.List{d})
	if redacted := (diag.List{d}).Err().(diag.List); strings.Contains(redacted[0].Refusal.Detail, "MARKER") || !strings.Contains(d.Refusal.Detail, "MARKER") {
		t.Errorf("List.Err: the refusal's detail %q keeps the key (or the diagnostic given was changed)", redacted[0].Refusal.Detail)
	}
	for _, out := range []string{d.String(), string(js), diag.List{d, d}.Error()} {
		if strings.Contains(out, "MARKER") || !strings.Contains(out, `Cluster "c"`) && !strings.Contains(out, `"name":"c"`) {
			t.Errorf("rendered: %s", out)
		}
	}
}
