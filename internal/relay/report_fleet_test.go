package relay_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// TestAnotherReplicaListsTheProxiesBehindARelay: two replicas on one etcd,
// a relay reporting to the first; the second's /proxies and pylon status
// list the relay's keys as the first replica's, from the summary the
// first publishes.
func TestAnotherReplicaListsTheProxiesBehindARelay(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "relay-token")
	if err := os.WriteFile(tokFile, []byte("relay-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := etcdtest.Start(t)
	start := func(id string) *daemontest.Daemon {
		return daemontest.Start(t, daemon.Options{
			Store: daemon.StoreEtcd, Identifier: id, RelayTokenFile: tokFile,
			Etcd: daemon.EtcdOptions{
				Endpoints: []string{srv.Endpoint()}, Prefix: "/relay-fleet",
				Timeout: 300 * time.Millisecond, StartTimeout: 10 * time.Second,
			},
			FleetStatusPeriod: 100 * time.Millisecond,
			DebounceQuiet:     daemontest.Quiet, DebounceMax: daemontest.MaxWait,
		})
	}
	a, b := start("replica-a"), start("replica-b")
	req, err := http.NewRequest(http.MethodPost, "http://"+a.Admin+"/v1/apply", bytes.NewBufferString(shardConfig+greeter(9001)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Token(t, "admin-token"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %s", resp.Status)
	}
	// The relay reads replica-a's groups: once replica-a serves the
	// applied ones, lest it key the proxy by the empty store's first.
	readA := a.Token(t, "read-token")
	if !eventually(func() bool {
		var st struct {
			Config struct{ Groups []struct{ Name string } } `json:"config"`
		}
		getJSON(t, a.Admin, "/status", readA, &st)
		return len(st.Config.Groups) == 2 && st.Config.Groups[0].Name == "edge-eu"
	}) {
		t.Fatal("replica-a does not serve the applied groups")
	}
	rd := startRelay(t, []string{a.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + a.Admin, UpstreamReadTokenFile: filepath.Join(a.DataDir, "read-token"),
		UpstreamRelayTokenFile: tokFile, ReportEvery: 50 * time.Millisecond,
	})
	subscribeEndpointsOf(t, rd.xds, "edge-1", "edge-eu")

	var got struct {
		Relays []struct {
			Relay, Replica string
			Keys           []struct {
				Key            string
				Proxies, ACKed int
			}
		} `json:"relays"`
	}
	readB := b.Token(t, "read-token")
	if !eventually(func() bool {
		got.Relays = nil
		getJSON(t, b.Admin, "/proxies", readB, &got)
		return len(got.Relays) == 1 && got.Relays[0].Relay == "relay-test" && got.Relays[0].Replica == "replica-a" &&
			len(got.Relays[0].Keys) == 1 && got.Relays[0].Keys[0].Key == "edge-eu" && got.Relays[0].Keys[0].ACKed == 1
	}) {
		t.Fatalf("replica-b's /proxies relays %+v, want relay-test's edge-eu key (1 proxy, ACKed) as replica-a's", got.Relays)
	}
	var out, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"status", "--admin-addr", b.Admin, "--data-dir", b.DataDir}, &out, &stderr); code != 0 {
		t.Fatalf("pylon status on replica-b: exit %d: %s", code, stderr.String())
	}
	if row := `(?m)^relay-test\s+replica-a\s+edge-eu\s+1\s+1\s+0\s+0\s+\S+$`; !regexp.MustCompile(row).MatchString(out.String()) {
		t.Errorf("pylon status on replica-b lacks %s:\n%s", row, out.String())
	}
}
