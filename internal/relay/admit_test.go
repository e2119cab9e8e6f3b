package relay_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// TestRelayRefusesANewKeyPastItsBound: the relay holds at most --max-keys
// keys; a proxy of one more key is refused with RESOURCE_EXHAUSTED naming
// the bound, while the keys held go on serving.
func TestRelayRefusesANewKeyPastItsBound(t *testing.T) {
	up := startUpstream(t, "", greeter(9001))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{MaxKeys: 1})
	conn := xdstest.Dial(t, rd.xds)
	if err := xdstest.StreamErr(conn, &corev3.Node{Id: "a-1", Cluster: "a"}); err != nil {
		t.Fatalf("the first key's proxy: %v", err)
	}
	err := xdstest.StreamErr(conn, &corev3.Node{Id: "b-1", Cluster: "b"})
	if grpcstatus.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-keys") {
		t.Fatalf("a proxy of a second key: %v, want RESOURCE_EXHAUSTED naming --max-keys", err)
	}
	if err := xdstest.StreamErr(conn, &corev3.Node{Id: "a-2", Cluster: "a"}); err != nil {
		t.Fatalf("another proxy of the key held: %v", err)
	}
}

// TestRelayRefusesANodeItCannotKey: a node without the template's field
// is refused, told which field it lacks.
func TestRelayRefusesANodeItCannotKey(t *testing.T) {
	up := startUpstream(t, "", greeter(9001))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	err := xdstest.StreamErr(xdstest.Dial(t, rd.xds), &corev3.Node{Id: "nameless"})
	if grpcstatus.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "cluster") {
		t.Fatalf("a node without a cluster: %v, want FAILED_PRECONDITION naming cluster", err)
	}
}

// TestRelayDropsAKeyNoProxyUses: once no proxy of a key has been
// connected for --idle-key, the key's upstream stream, group and kept
// file go.
func TestRelayDropsAKeyNoProxyUses(t *testing.T) {
	up := startUpstream(t, "", greeter(9001))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{IdleKey: 100 * time.Millisecond})
	if err := xdstest.StreamErr(xdstest.Dial(t, rd.xds), &corev3.Node{Id: "a-1", Cluster: "a"}); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(rd.dataDir, "relay-keys")
	if !eventually(func() bool {
		files, _ := os.ReadDir(kept)
		return len(rd.r.Keys()) == 0 && len(open(proxies(t, up.d.Admin, up.read))) == 0 && len(files) == 0
	}) {
		files, _ := os.ReadDir(kept)
		t.Fatalf("keys %+v, upstream streams %d, kept files %d: want the idle key gone", rd.r.Keys(), len(open(proxies(t, up.d.Admin, up.read))), len(files))
	}
}
