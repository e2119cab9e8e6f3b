package relay_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
)

// upstreamRelays is /proxies's relays on an upstream.
type upstreamRelays struct {
	Relays []struct {
		Relay string `json:"relay"`
		Keys  []struct {
			Key                             string
			Version                         string
			Proxies, ACKed, NACKed, Pending int
		} `json:"keys"`
	} `json:"relays"`
}

// TestRelayDownstreamStatusShowsUpstream: a relay in front of a Pylon
// reports its downstream proxies per key (counts and the key's version,
// no node's name), and the upstream's /proxies lists them as behind the
// relay, apart from the streams it serves itself. The relay posts with
// the upstream's relay token (--relay-token-file), not the read token.
func TestRelayDownstreamStatusShowsUpstream(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "relay-token")
	if err := os.WriteFile(tokFile, []byte("relay-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := startUpstreamWith(t, "", twoGroups+greeter(9001), func(o *daemon.Options) { o.RelayTokenFile = tokFile })
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + up.d.Admin, UpstreamReadTokenFile: filepath.Join(up.d.DataDir, "read-token"),
		UpstreamRelayTokenFile: tokFile, ReportEvery: 50 * time.Millisecond,
	})
	for _, p := range []struct{ id, cluster string }{{"edge-1", "site-a"}, {"edge-2", "site-b"}, {"mesh-1", "mesh"}} {
		subscribeEndpointsOf(t, rd.xds, p.id, p.cluster)
	}
	var got upstreamRelays
	want := map[string]int{"edge": 2, "mesh": 1}
	if !eventually(func() bool {
		got = upstreamRelays{}
		getJSON(t, up.d.Admin, "/proxies", up.read, &got)
		if len(got.Relays) != 1 || got.Relays[0].Relay != "relay-test" || len(got.Relays[0].Keys) != 2 {
			return false
		}
		for _, k := range got.Relays[0].Keys {
			if k.Proxies != want[k.Key] || k.ACKed != want[k.Key] || k.NACKed+k.Pending != 0 || k.Version == "" {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the upstream's /proxies relays %+v, want relay-test with edge's 2 proxies and mesh's 1, all ACKed", got.Relays)
	}
	if n := len(open(proxies(t, up.d.Admin, up.read))); n != 2 {
		t.Errorf("the upstream lists %d streams of its own, want the relay's two keys' (the proxies behind it apart)", n)
	}

	// pylon status on the upstream lists them, behind the relay.
	var out, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"status", "--admin-addr", up.d.Admin, "--data-dir", up.d.DataDir}, &out, &stderr); code != 0 {
		t.Fatalf("pylon status on the upstream: exit %d: %s", code, stderr.String())
	}
	for _, row := range []string{`(?m)^Behind relays`, `(?m)^relay-test\s+upstream\s+edge\s+2\s+2\s+0\s+0\s+\S+$`, `(?m)^relay-test\s+upstream\s+mesh\s+1\s+1\s+0\s+0\s+\S+$`} {
		if !regexp.MustCompile(row).MatchString(out.String()) {
			t.Errorf("pylon status on the upstream lacks %s:\n%s", row, out.String())
		}
	}
}
