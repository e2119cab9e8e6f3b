package csds

import (
	"context"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const cacheKeyMarker = "MIIEcacheTESTsecretKEYmaterial"

func keySecret(name string) *tlsv3.Secret {
	pem := "-----BEGIN PRIVATE KEY-----\n" + cacheKeyMarker + "\n-----END PRIVATE KEY-----\n"
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		PrivateKey: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: pem}},
	}}}
}

// TestRedactedOncePerResource: a resource sent to many nodes is redacted
// once; every node's entry shares the packed result, which holds no key.
func TestRedactedOncePerResource(t *testing.T) {
	s := New(Options{Tracker: status.NewTracker(status.Options{}), Registry: xdstype.New(), Authorize: func(context.Context) error { return nil }})
	shared := []proto.Message{keySecret("s1"), keySecret("s2")}
	var streams []status.Stream
	for _, node := range []string{"n1", "n2", "n3"} {
		streams = append(streams, status.Stream{Node: node, Types: []*status.Type{{Type: "SDS", State: status.Synced, LastSent: shared}}})
	}
	all := func(string) bool { return true }
	first, _ := s.build(streams, all, true)
	again, _ := s.build(streams, all, true)
	if len(first.Config) != 3 || s.redacted.len() != 2 {
		t.Fatalf("%d nodes, %d cached resources; want 3 nodes, 2 cached", len(first.Config), s.redacted.len())
	}
	want := first.Config[0].GenericXdsConfigs[0].XdsConfig
	for i, cc := range append(first.Config, again.Config...) {
		got := cc.GenericXdsConfigs[0].XdsConfig
		if got != want {
			t.Fatalf("node %d: s1 packed again, not shared", i)
		}
	}
	if strings.Contains(string(want.GetValue()), cacheKeyMarker) {
		t.Fatal("the cached resource holds the key")
	}
}

// TestAnyCacheBounded: the cache keeps about two generations of max
// entries, and an entry in use survives a turnover.
func TestAnyCacheBounded(t *testing.T) {
	c := newAnyCache(4)
	hot := keySecret("hot")
	a := c.get(hot)
	for i := range 100 {
		c.get(keySecret("s" + string(rune('a'+i%26))))
		if c.get(hot) != a {
			t.Fatalf("after %d others, the hot entry was packed again", i+1)
		}
		if n := c.len(); n > 8 {
			t.Fatalf("%d entries held, want at most 8", n)
		}
	}
}
