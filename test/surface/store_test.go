package surface

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// startStore runs the daemon in store mode (config through the admin API)
// and returns it with its write token.
func startStore(t *testing.T) (*pylon, string) {
	t.Helper()
	dataDir := t.TempDir()
	o := daemon.Options{DataDir: dataDir, Identifier: identifier, XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		DebounceQuiet: 10 * time.Millisecond, DebounceMax: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	errc := make(chan error, 1)
	o.OnReady = func(x, a string) { ready <- [2]string{x, a} }
	go func() { errc <- daemon.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	p := &pylon{}
	select {
	case addrs := <-ready:
		p.xdsAddr, p.adminAddr = addrs[0], addrs[1]
	case err := <-errc:
		errc <- err
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(bound):
		t.Fatal("daemon did not start")
	}
	tok := func(f string) string {
		b, err := os.ReadFile(filepath.Join(dataDir, f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	p.readToken = tok("read-token")
	return p, tok("admin-token")
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
