package surface

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/pipeline"
)

// bound is how long a test waits for anything to happen.
const bound = 10 * time.Second

// identifier is what the daemon puts in control_plane.identifier (X9).
const identifier = "pylon-surface"

// pylon is a daemon in file mode serving the config at path.
type pylon struct {
	xdsAddr, adminAddr string
	path, readToken    string
}

// start runs the daemon in file mode on loopback ports with config until
// the test ends.
func start(t *testing.T, config string) *pylon {
	t.Helper()
	dir := t.TempDir()
	p := &pylon{path: filepath.Join(dir, "pylon.yaml")}
	p.write(t, config)
	o := daemontest.FileMode(p.path)
	o.Identifier = identifier
	o.DebounceQuiet, o.DebounceMax = 10*time.Millisecond, 100*time.Millisecond
	d := daemontest.Start(t, o)
	p.xdsAddr, p.adminAddr = d.XDS, d.Admin
	p.readToken = d.Token(t, "read-token")
	return p
}

// write replaces the config the way deploy tools do: a new file renamed
// over the old one.
func (p *pylon) write(t *testing.T, config string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(p.path), ".tmp-pylon.yaml")
	if err := os.WriteFile(tmp, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.path); err != nil {
		t.Fatal(err)
	}
}

// status reads the pipeline's status from the admin API.
func (p *pylon) status(t *testing.T) pipeline.Status {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.adminAddr+"/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /status: %d %v: %s", resp.StatusCode, err, body)
	}
	var out struct {
		Config pipeline.Status `json:"config"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Config
}

// refusal waits for the daemon to refuse a change and returns why.
func (p *pylon) refusal(t *testing.T) *pipeline.Refusal {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if r := p.status(t).Refused; r != nil {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the change was not refused")
	return nil
}

// config is a config file holding the given raw resources, and the probe
// Runtime resource the scripted client's ExpectSilence asks for.
func config(resources ...string) string {
	return "version: 1\nresources:\n" + runtime("xdstest-probe", 0) + strings.Join(resources, "")
}

func runtime(name string, v int) string {
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  name: %s
  layer: { some.key: %d, other.key: on }
`, name, v)
}

const faultURL = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"

// extension is an ECDS fault filter config aborting pct percent of requests.
func extension(name string, pct int) string {
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig
  name: %s
  typed_config:
    "@type": %s
    abort: { http_status: 503, percentage: { numerator: %d } }
`, name, faultURL, pct)
}

// rbacExtension is an ECDS config of another type than the fault filter.
func rbacExtension(name string) string {
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig
  name: %s
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
`, name)
}

// listener is an HTTP listener on port whose routes come from SRDS and
// whose HTTP filters named in ecds are fault filters fetched by ECDS.
func listener(name string, port int, ecds ...string) string {
	var filters strings.Builder
	for _, f := range ecds {
		fmt.Fprintf(&filters, `
        - name: %s
          config_discovery:
            config_source: { ads: {}, resource_api_version: V3 }
            type_urls: [%s]`, f, faultURL)
	}
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: %s
  address: { socket_address: { address: 127.0.0.1, port_value: %d } }
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: %[1]s
        scoped_routes:
          name: %[1]s
          scope_key_builder: { fragments: [{ header_value_extractor: { name: x-tenant } }] }
          rds_config_source: { ads: {}, resource_api_version: V3 }
          scoped_rds: { scoped_rds_config_source: { ads: {}, resource_api_version: V3 } }
        http_filters:%[3]s
        - name: envoy.filters.http.router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
`, name, port, filters.String())
}

// scope is an SRDS scope for requests whose x-tenant header is key.
func scope(name, key, route string) string {
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration
  name: %s
  route_configuration_name: %s
  key: { fragments: [{ string_key: %s }] }
`, name, route, key)
}

// route answers every request with body.
func route(name, body string) string {
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: %s
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: { prefix: / }
      direct_response: { status: 200, body: { inline_string: %q } }
`, name, body)
}

// eventually polls cond every 10ms until it holds, within bound.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
