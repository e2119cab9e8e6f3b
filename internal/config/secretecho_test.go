package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// marker stands for key material an operator put in the wrong place.
const marker = "SUPERSECRET-hunter2-notbase64!!"

// A refused raw resource never has its value quoted in a diagnostic: the
// value may be a key, and diagnostics reach GET /status, the log, `pylon
// validate` and the API's 400. The field and the line still say where.
func TestRefusedValueNeverQuoted(t *testing.T) {
	const secret = "resources:\n- \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\n  name: s1\n"
	for _, c := range []struct {
		name, src, field, says string
		line                   int
	}{
		{"inline_bytes not base64 (YAML)", secret + "  generic_secret:\n    secret:\n      inline_bytes: " + marker + "\n", "inline_bytes", "not valid base64", 6},
		{"inline_bytes not base64 (JSON)", `{"resources":[{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s1","generic_secret":{"secret":{"inline_bytes":"` + marker + `"}}}]}`, "inline_bytes", "not valid base64", 1},
		{"private_key inline_string a list", secret + "  tls_certificate:\n    private_key:\n      inline_string: [\"" + marker + "\"]\n", "inline_string", "expected a string, got a list", 6},
		{"private_key inline_string a mapping", secret + "  tls_certificate:\n    private_key:\n      inline_string: {k: \"" + marker + "\"}\n", "inline_string", "expected a string, got a mapping", 6},
		{"private_key a string", secret + "  tls_certificate:\n    private_key: \"" + marker + "\"\n", "private_key", "got a string", 5},
		{"password a string", secret + "  tls_certificate:\n    password: \"" + marker + "\"\n", "password", "got a string", 5},
		{"password inline_bytes a number", secret + "  tls_certificate:\n    password: {inline_bytes: 1234}\n", "inline_bytes", "expected base64 text, got a number", 5},
		{"nested typed_config", "resources:\n- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n  name: l1\n  address: {socket_address: {address: 127.0.0.1, port_value: 1}}\n  filter_chains:\n  - transport_socket:\n      name: tls\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext\n        common_tls_context:\n          tls_certificates:\n          - private_key: {inline_bytes: \"" + marker + "\"}\n", "", "base64", 0},
		{"duration", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c1\n  connect_timeout: \"" + marker + "\"\n", "connect_timeout", "not a valid duration", 4},
		{"enum", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c1\n  type: \"" + marker + "\"\n", "type", "not one of the enum's value names", 4},
		{"@ttl", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c1\n  \"@ttl\": \"" + marker + "\"\n", "@ttl", "not a positive duration", 4},
		{"wrapper", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c1\n  per_connection_buffer_limit_bytes: \"" + marker + "\"\n", "per_connection_buffer_limit_bytes", "whole number", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(xdstype.New(), []File{{Path: "t.yaml", Data: []byte(c.src)}})
			var dl diag.List
			if !errors.As(err, &dl) || len(dl) == 0 {
				t.Fatalf("got %v, want diagnostics", err)
			}
			for _, d := range dl {
				if strings.Contains(d.String(), "SUPERSECRET") || strings.Contains(d.String(), "hunter2") {
					t.Errorf("a diagnostic quotes the refused value: %s", d)
				}
			}
			d := dl[0]
			if !strings.Contains(d.Message, c.says) || (c.field != "" && d.Field != c.field) || (c.line != 0 && d.Line != c.line) {
				t.Errorf("got %s (field %q line %d), want field %q line %d saying %q", d, d.Field, d.Line, c.field, c.line, c.says)
			}
		})
	}
}

// A protojson message this code does not recognise keeps its words but
// loses every quoted string and what follows its last colon.
func TestScrubValues(t *testing.T) {
	got := scrubValues(`some new failure "` + marker + `" in field x: ` + marker)
	if strings.Contains(got, "SUPERSECRET") || !strings.Contains(got, "some new failure") {
		t.Fatalf("scrubValues: %s", got)
	}
}
