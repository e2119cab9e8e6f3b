package upstream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const bound = 10 * time.Second

// recorder keeps the upstream's stream events.
type recorder struct {
	mu     sync.Mutex
	events []status.Event
}

func (r *recorder) Observe(e *status.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := *e
	c.Status, c.Member, c.Sent = nil, nil, nil
	r.events = append(r.events, c)
}

func (r *recorder) find(f func(status.Event) bool) *status.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.events {
		if f(r.events[i]) {
			e := r.events[i]
			return &e
		}
	}
	return nil
}

func eventually(cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func clusterType() upstream.Type {
	reg := xdstype.New()
	t := reg.Lookup(xdstype.ClusterURL)
	return upstream.Type{URL: t.URL, Wildcard: true, Check: func(a *anypb.Any) (string, error) {
		m := t.New()
		if err := proto.Unmarshal(a.GetValue(), m); err != nil {
			return "", err
		}
		return xdstype.NameOf(m), nil
	}}
}

// run runs a client until the test ends.
func run(t *testing.T, o upstream.Options) *upstream.Client {
	t.Helper()
	pool := upstream.NewPool(nil, 0, 0)
	o.Dial, o.Types = pool.Conn, []upstream.Type{clusterType()}
	if o.Node == nil {
		o.Node = &corev3.Node{Id: "relay/k", Cluster: "k"}
	}
	o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	c := upstream.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; pool.Close() })
	return c
}

func publishClusters(t *testing.T, s *xdstest.Server, n int) {
	t.Helper()
	var msgs []any
	for i := range n {
		msgs = append(msgs, xdstest.Cluster(fmt.Sprintf("c%d", i)), xdstest.Endpoints(fmt.Sprintf("c%d", i), 1))
	}
	s.Publish(t, msgs...)
}

// A response that would make the key hold more than its bound is NACKed,
// naming the bound, and the client keeps what it had.
func TestClientNACKsAResponsePastItsResourceBound(t *testing.T) {
	rec := &recorder{}
	s := xdstest.Start(t, xds.Options{Observer: rec})
	publishClusters(t, s, 3)
	c := run(t, upstream.Options{Addrs: []string{s.Addr}, MaxResources: 2})
	if !eventually(func() bool {
		return rec.find(func(e status.Event) bool { return e.Kind == status.RequestNACK }) != nil
	}) {
		t.Fatal("the upstream saw no NACK")
	}
	e := rec.find(func(e status.Event) bool { return e.Kind == status.RequestNACK })
	if !strings.Contains(e.Detail, "at most 2 resources") {
		t.Errorf("NACK detail %q does not name the bound", e.Detail)
	}
	if n := len(c.State()[xdstype.ClusterURL]); n != 0 {
		t.Errorf("the client holds %d clusters of a refused response", n)
	}
}

// A client that resumes with what it holds is sent nothing again.
func TestClientResumesWithWhatItHolds(t *testing.T) {
	rec := &recorder{}
	s := xdstest.Start(t, xds.Options{Observer: rec})
	publishClusters(t, s, 2)
	first := run(t, upstream.Options{Addrs: []string{s.Addr}, Node: &corev3.Node{Id: "relay/first", Cluster: "k"}})
	if !eventually(func() bool { return len(first.State()[xdstype.ClusterURL]) == 2 }) {
		t.Fatal("the first client did not get the two clusters")
	}
	second := run(t, upstream.Options{Addrs: []string{s.Addr}, Node: &corev3.Node{Id: "relay/second", Cluster: "k"}, Resume: first.State()})
	if !eventually(func() bool {
		return rec.find(func(e status.Event) bool { return e.NodeID() == "relay/second" && e.Kind == status.RequestACK }) != nil
	}) {
		t.Fatal("the second client never answered the upstream")
	}
	if e := rec.find(func(e status.Event) bool {
		return e.NodeID() == "relay/second" && e.Kind == status.ResponseSent && e.Resources > 0
	}); e != nil {
		t.Fatalf("the upstream sent the resuming client %d resources again", e.Resources)
	}
	if len(second.State()[xdstype.ClusterURL]) != 2 {
		t.Fatal("the resuming client lost what it held")
	}
}
