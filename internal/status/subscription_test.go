package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A subscription is kept per stream and type, sorted, replaced on every
// change; the client's names are bounded in count and length.
func TestSubscribedBounded(t *testing.T) {
	tr := NewTracker(Options{})
	info := Info{Node: "n"}
	now := time.Now()
	sub := func() *Subscription { return tr.Streams()[0].Types[0].Subscription }

	tr.Subscribed(1, info, "cds", false, []string{"b", "a"}, now)
	if d := cmp.Diff(&Subscription{Names: []string{"a", "b"}}, sub()); d != "" {
		t.Errorf("named (-want +got):\n%s", d)
	}
	tr.Subscribed(1, info, "cds", true, nil, now)
	if d := cmp.Diff(&Subscription{Wildcard: true}, sub()); d != "" {
		t.Errorf("a change to the wildcard (-want +got):\n%s", d)
	}
	many := make([]string, 0, MaxSubscribedNames+2)
	for i := range MaxSubscribedNames + 1 {
		many = append(many, fmt.Sprintf("n%06d", i))
	}
	many = append(many, strings.Repeat("x", maxNameBytes+1))
	tr.Subscribed(1, info, "cds", false, many, now)
	if s := sub(); len(s.Names) != MaxSubscribedNames || s.Dropped != 2 {
		t.Errorf("%d names kept, %d dropped; want %d kept, 2 dropped", len(s.Names), s.Dropped, MaxSubscribedNames)
	}
	if n := len(tr.Streams()[0].Types); n != 1 {
		t.Errorf("%d types, want the one subscribed to", n)
	}
}
