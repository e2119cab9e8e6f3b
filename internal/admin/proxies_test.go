package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/status"
)

// otherReplicas is what fleetstatus.Fleet.Remote returns, set by the test
// (the real one, on etcd, is exercised in fleetstatus and integration).
type otherReplicas struct {
	remote  []fleetstatus.Remote
	partial string
}

func (o otherReplicas) Remote() ([]fleetstatus.Remote, string) { return o.remote, o.partial }

func (o otherReplicas) Relays() []fleetstatus.RemoteRelay { return nil }

// /proxies lists this replica's streams and the others', each naming its
// replica, by node; /proxies/{id} finds a node served elsewhere; what
// another replica wrote is scrubbed again; partial is said.
func TestProxiesMergeReplicas(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
	fleet := otherReplicas{partial: fleetstatus.Partial + " (test)", remote: []fleetstatus.Remote{
		{Replica: "pylon-b", Proxy: fleetstatus.Proxy{Node: "a-node", Group: "g", Kind: "ADS", Types: []fleetstatus.Type{{Type: "CDS", State: status.Nacked, Sent: "v2", ACKed: "v1", NACK: &fleetstatus.NACK{Version: "v2", Detail: "bad: " + key}}}}},
		{Replica: "pylon-c", Proxy: fleetstatus.Proxy{Node: "z-node", Group: "g", Kind: "ADS delta"}},
	}}
	h := newHarness(t, Options{Token: writeTok, Identifier: "pylon-a", Fleet: fleet}, nil)
	h.src.streams = []status.Stream{{ID: 1, Node: "m-node", Group: "g", Kind: "ADS", Since: time.Now()}}

	code, body := h.do(t, "GET", "/proxies", writeTok, nil)
	if code != http.StatusOK {
		t.Fatalf("/proxies: %d %s", code, body)
	}
	var got struct {
		Streams []proxyEntry `json:"streams"`
		Partial string       `json:"partial"`
	}
	decode(t, body, &got)
	var seen []string
	for _, s := range got.Streams {
		seen = append(seen, s.Replica+"/"+s.Node)
	}
	if want := "pylon-b/a-node pylon-a/m-node pylon-c/z-node"; strings.Join(seen, " ") != want {
		t.Errorf("/proxies lists %v, want %s", seen, want)
	}
	if !strings.HasPrefix(got.Partial, fleetstatus.Partial) {
		t.Errorf("/proxies says partial %q", got.Partial)
	}
	if strings.Contains(body, "MIIEvQ") {
		t.Errorf("key material from another replica's summary shown: %s", body)
	}

	code, body = h.do(t, "GET", "/proxies/a-node", writeTok, nil)
	if code != http.StatusOK || !strings.Contains(body, `"replica": "pylon-b"`) || !strings.Contains(body, `"version": "v1"`) {
		t.Errorf("/proxies/a-node: %d %s", code, body)
	}
}

// Without a fleet (the embedded store), every stream is this replica's.
func TestProxiesSingleReplica(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, Identifier: "pylon-a"}, nil)
	h.src.streams = []status.Stream{{ID: 1, Node: "m-node", Group: "g", Kind: "ADS", Since: time.Now()}}
	code, body := h.do(t, "GET", "/proxies", writeTok, nil)
	if code != http.StatusOK || !strings.Contains(body, `"replica": "pylon-a"`) || strings.Contains(body, "partial") {
		t.Errorf("/proxies: %d %s", code, body)
	}
}
