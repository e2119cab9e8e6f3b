package surface

import (
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// startStore runs the daemon in store mode (config through the admin API)
// and returns it with its write token.
func startStore(t *testing.T) (*pylon, string) {
	t.Helper()
	d := daemontest.Start(t, daemon.Options{Identifier: identifier,
		DebounceQuiet: 10 * time.Millisecond, DebounceMax: 100 * time.Millisecond})
	p := &pylon{xdsAddr: d.XDS, adminAddr: d.Admin, readToken: d.Token(t, "read-token")}
	return p, d.Token(t, "admin-token")
}

func post(t *testing.T, p *pylon, token, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.adminAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// Raw ECDS, RTDS and SRDS resources applied through the admin API are
// stored, checked like a config file's and served.
func TestStoreApply(t *testing.T) {
	p, token := startStore(t)
	doc, err := os.ReadFile("../../examples/extensions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A scope naming a route that does not exist is refused whole, with
	// the object and field named.
	bad := strings.Replace(string(doc), "route_configuration_name: tenant-b-routes", "route_configuration_name: nope", 1)
	if code, body := post(t, p, token, "/v1/apply", bad); code/100 != 4 || !strings.Contains(body, "route_configuration_name") || !strings.Contains(body, `resources.ScopedRouteConfiguration/tenant-b`) {
		t.Fatalf("bad apply: %d %s", code, body)
	}
	if code, body := post(t, p, token, "/v1/apply", string(doc)); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	st := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
	for _, c := range []struct {
		typeURL string
		names   []string // nil: wildcard
		want    []string
	}{
		{xdstype.ExtensionConfURL, []string{"fault"}, []string{"fault"}},
		{xdstype.RuntimeURL, []string{"overrides"}, []string{"overrides"}},
		{xdstype.ScopedRouteURL, nil, []string{"tenant-a", "tenant-b"}},
	} {
		st.Request(c.typeURL, c.names...)
		resp := st.RecvType(c.typeURL)
		if got := sortedKeys(decode(t, c.typeURL, resp.GetResources())); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.typeURL, got, c.want)
		}
		st.ACK(resp, c.names...)
	}
}
