package relay

import (
	"fmt"
	"testing"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Streams of a key asking for the same names hold one list of them, not
// a list each (with the request each was decoded from): what a relay
// holds per proxy is its stream, not its key's names again.
func TestStreamsAskingAlikeShareTheirKeysList(t *testing.T) {
	ks := &keyState{maxAsked: 1000}
	names := func() []string {
		var out []string
		for i := range 100 {
			out = append(out, fmt.Sprintf("cluster-%03d", i))
		}
		return out
	}
	first := ks.addAsked(xdstype.EndpointURL, askedSub{names: names()})
	second := ks.addAsked(xdstype.EndpointURL, askedSub{names: names()})
	if &first.names[0] != &second.names[0] {
		t.Error("two streams asking for the same 100 names hold a list each")
	}
	other := ks.addAsked(xdstype.EndpointURL, askedSub{names: names()[:50]})
	if len(other.names) != 50 || &other.names[0] == &first.names[0] {
		t.Errorf("a stream asking for other names holds %d names of the shared list", len(other.names))
	}
	ks.dropAsked(xdstype.EndpointURL, first)
	ks.dropAsked(xdstype.EndpointURL, second)
	ks.dropAsked(xdstype.EndpointURL, other)
	if len(ks.asked) != 0 || ks.askedNames != 0 {
		t.Errorf("after every stream let go: asked %v, %d names counted", ks.asked, ks.askedNames)
	}
}
