package config

import (
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// The JSON path marks the raw JSON it has checked with a YAML tag of
// Pylon's own (rawJSONTag). A YAML file carrying that tag is refused,
// naming its line: taken as checked JSON, text the author chose crashed
// the loader (an index out of range on '{,}') or was copied into a
// resource verbatim, past YAML's duplicate-key check
// (`protocol: !pylon/rawjson '"http", "protocol": "http2"'`).
func TestYAMLCannotUsePylonsRawJSONTag(t *testing.T) {
	for _, d := range []string{
		"services:\n- !pylon/rawjson '{,}'\n",
		"services:\n- !pylon/rawjson '{\"a\"'\n",
		"services:\n- name: a\n  protocol: !pylon/rawjson '\"http\", \"protocol\": \"http2\"'\n",
		"services:\n- !pylon/rawjson '{\"name\": \"a\", \"protocol\": \"http2\"}'\n",
		"resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n  connect_timeout: !pylon/rawjson '\"1s\", \"name\": \"evil\"'\n",
		"services:\n- name: a\n  protocol: !<!pylon/rawjson> '\"http2\"'\n",
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%q: the loader panicked: %v", d, r)
				}
			}()
			_, err := Load(xdstype.New(), []File{{Path: "c.yaml", Data: []byte(d)}})
			if err == nil || !strings.Contains(err.Error(), "c.yaml:") || !strings.Contains(err.Error(), "!pylon/rawjson") {
				t.Errorf("%q: err %v, want a refusal naming c.yaml's line and the tag", d, err)
			}
		}()
	}
}

// A TTL under MinTTL is refused, naming the field: Pylon refreshes a
// TTL'd resource at half its TTL to every proxy holding it, so "2ms"
// would be a thousand heartbeats a second a proxy.
func TestATTLUnderASecondIsRefused(t *testing.T) {
	doc := "resources:\n- \"@type\": type.googleapis.com/envoy.service.runtime.v3.Runtime\n  \"@ttl\": 2ms\n  name: fault\n  layer: {}\n"
	_, err := Load(xdstype.New(), []File{{Path: "c.yaml", Data: []byte(doc)}})
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3") || !strings.Contains(err.Error(), "@ttl: 2ms: at least 1s") {
		t.Errorf("a 2ms TTL: %v, want it refused naming c.yaml:3 and @ttl", err)
	}
	if _, err := Load(xdstype.New(), []File{{Path: "c.yaml", Data: []byte(strings.Replace(doc, "2ms", "1s", 1))}}); err != nil {
		t.Errorf("a 1s TTL: %v", err)
	}
}
