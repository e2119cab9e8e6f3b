package xds_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// admits records what Options.Admit was asked and released.
type admits struct {
	mu       sync.Mutex
	asked    []string
	released int
	refuse   string // a node id to refuse
}

func (a *admits) admit(_ context.Context, n nodegroup.Node) (func(), xds.Subscribed, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, n.ID)
	if n.ID == a.refuse {
		return nil, nil, grpcstatus.Errorf(codes.ResourceExhausted, "no room for %s", n.ID)
	}
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.released++
	}, nil, nil
}

func (a *admits) get() ([]string, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...), a.released
}

// Options.Admit sees only nodes the server accepted: a stream whose node
// its certificate does not prove is refused before Admit is asked (a
// relay would otherwise open an upstream stream for any claim), an
// admitted stream's release runs when it ends, and Admit's refusal ends
// the stream with its status.
func TestAdmitSeesOnlyAcceptedNodes(t *testing.T) {
	a := &admits{refuse: "edge-3"}
	m := startMTLS(t, xds.Options{Admit: a.admit})

	claimed := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-2"), edgeNode("edge-1"))
	claimed.Request(cds)
	if err := claimed.Err(); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Fatalf("a claim the certificate does not prove: %v, want PermissionDenied", err)
	}
	if asked, _ := a.get(); len(asked) != 0 {
		t.Fatalf("Admit was asked of %v, refused claims among them", asked)
	}

	ok := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-1"), edgeNode("edge-1"))
	ok.Request(cds)
	ok.Recv()
	if asked, _ := a.get(); len(asked) != 1 || asked[0] != "edge-1" {
		t.Fatalf("Admit asked of %v, want [edge-1]", asked)
	}

	refused := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-3"), edgeNode("edge-3"))
	refused.Request(cds)
	if err := refused.Err(); grpcstatus.Code(err) != codes.ResourceExhausted || grpcstatus.Convert(err).Message() != "no room for edge-3" {
		t.Fatalf("a stream Admit refuses ended with %v, want its ResourceExhausted", err)
	}

	ok.Close()
	m.rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamClosed && e.NodeID() == "edge-1" })
	deadline := time.Now().Add(xdstest.Timeout)
	for _, released := a.get(); released != 1; _, released = a.get() {
		if time.Now().After(deadline) {
			t.Fatalf("released %d times after the admitted stream ended, want 1", released)
		}
		time.Sleep(5 * time.Millisecond) // release runs just after the closed event
	}
}
