package relay_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// TestKeptKeysFolderOpenToOthersRefusesToStart: a relay-keys folder that
// others can read or write (the served config of every key, which a
// writer could replace) stops the relay at start, naming the folder and
// the fix.
func TestKeptKeysFolderOpenToOthersRefusesToStart(t *testing.T) {
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "relay-keys")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o757); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	o := daemon.Options{XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DataDir: dataDir, Identifier: "relay-e2e"}
	err := daemon.RunRelay(ctx, o, daemon.RelayOptions{Upstreams: []string{"127.0.0.1:1"}, ID: "relay-test"})
	if err == nil || !strings.Contains(err.Error(), "relay-keys") || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("a relay over a relay-keys folder of mode 0757: %v, want a refusal naming the folder and chmod 700", err)
	}
}

// TestKeptFilePastMaxKeyResourcesIsSkipped: a kept key holding more
// resources than --max-key-resources is not loaded at start (the upstream
// sends that key's config again, within the bound).
func TestKeptFilePastMaxKeyResourcesIsSkipped(t *testing.T) {
	up := startUpstream(t, "", greeter(9001))
	dataDir := t.TempDir()
	rd := startRelay(t, []string{up.d.XDS}, dataDir, daemon.RelayOptions{})
	if _, p := subscribeEndpoints(t, rd.xds, "proxy-1"); p != 9001 {
		t.Fatalf("endpoints through the relay on port %d, want 9001", p)
	}
	rd.stop()
	up.d.Stop(t)
	rd = startRelay(t, []string{up.d.XDS}, dataDir, daemon.RelayOptions{MaxResources: 1})
	if k := rd.r.Keys(); len(k) != 0 {
		t.Fatalf("the relay, bound to 1 resource a key, loaded %d kept keys (%+v), want the file skipped", len(k), k)
	}
}
