package xds_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// toldHook records what Admit's subscribed hook is told.
type toldHook struct {
	mu   sync.Mutex
	told []string
}

func (s *toldHook) admit(context.Context, nodegroup.Node) (func(), xds.Subscribed, error) {
	return func() {}, func(typeURL string, wildcard bool, names []string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.told = append(s.told, fmt.Sprintf("%s %v %v", typeURL, wildcard, names))
	}, nil
}

func (s *toldHook) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.told)
}

// Admit's subscribed hook is told a stream's subscription to each
// per-resource type each time a request changes it, before the request
// is answered (what a relay fetches for its proxies): never for a
// full-state type, nor for an ACK that repeats the names.
func TestSubscribedHookIsToldPerResourceSubscriptionChanges(t *testing.T) {
	a := &toldHook{}
	srv := xdstest.Start(t, xds.Options{Admit: a.admit})
	srv.Publish(t, xdstest.APIListener("l", "r1"), xdstest.Route("r1", "c"), xdstest.Route("r2", "c"), xdstest.Cluster("c"), xdstest.Endpoints("c", 1))
	conn := xdstest.Dial(t, srv.Addr)

	d := xdstest.OpenDeltaADS(t, conn, xdstest.Node("delta"))
	d.Subscribe(cds)
	d.ACK(d.RecvType(cds))
	d.Subscribe(rds, "r1", "r2")
	d.ACK(d.RecvType(rds))
	d.Unsubscribe(rds, "r1")
	d.Subscribe(rds, "*")
	d.RecvType(rds)
	want := []string{rds + " false [r1 r2]", rds + " false [r2]", rds + " true [r2]"}
	if got := a.get(); !slices.Equal(got, want) {
		t.Fatalf("the hook was told %q, want %q", got, want)
	}

	a.mu.Lock()
	a.told = nil
	a.mu.Unlock()
	s := xdstest.OpenADS(t, conn, xdstest.Node("sotw"))
	s.Request(rds, "r1")
	s.RecvType(rds)
	s.Request(rds, "r1") // the ACK
	s.Request(rds, "r1")
	s.Request(rds, "r2", "r1")
	s.RecvType(rds)
	want = []string{rds + " false [r1]", rds + " false [r1 r2]"}
	if got := a.get(); !slices.Equal(got, want) {
		t.Fatalf("the hook was told %q, want %q", got, want)
	}
}
