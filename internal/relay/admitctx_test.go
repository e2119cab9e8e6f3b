package relay

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A stream waiting for its key's first config (an upstream that never
// answers) stops waiting when its client leaves or the server stops,
// rather than for the whole first-config wait, and its place in the key
// is given back.
func TestAdmitStopsWaitingWhenTheStreamEnds(t *testing.T) {
	// An address nothing listens on: the key's upstream never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	pool := upstream.NewPool(nil, 0, 0)
	defer pool.Close()
	tmpl, _ := ParseTemplate("{cluster}")
	r := New(Options{Upstreams: []string{dead}, Pool: pool, Template: tmpl, ID: "relay", Registry: xdstype.New(), Publisher: fleet.NewPublisher()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	streamCtx, leave := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, leave)
	start := time.Now()
	release, _, err := r.Admit(streamCtx, nodegroup.Node{ID: "p", Cluster: "k"})
	if took := time.Since(start); took >= firstConfigWait || !errors.Is(err, context.Canceled) || release != nil {
		t.Fatalf("Admit of a stream whose client left after 50ms: returned after %v with %v; want context.Canceled well before %v", took, err, firstConfigWait)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ks := r.keys["k"]; ks != nil && ks.streams != 0 {
		t.Errorf("key k counts %d streams after the only one left, want 0", ks.streams)
	}
}
