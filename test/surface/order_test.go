package surface

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// order is one make-before-break case on ADS: a change adds first (named
// by the client before it exists, X21) together with then, which names
// it; first must reach the client before then.
type order struct {
	first, then         string // type URLs
	firstName, thenName string // subscribed names; "" for a wildcard
	v1, v2              string
}

func orders() map[string]order {
	return map[string]order{
		// A listener warms on its ECDS filter configs: the config first.
		"ECDS_before_the_listener_naming_it": {
			first: xdstype.ExtensionConfURL, firstName: "f", then: xdstype.ListenerURL,
			v1: config(listener("l", 10001)),
			v2: config(extension("f", 1), listener("l", 10001, "f")),
		},
		// The listener warms on its scopes, a scope on its routes: LDS,
		// SRDS, RDS, as RDS comes after LDS.
		"SRDS_before_the_routes_its_scopes_name": {
			first: xdstype.ScopedRouteURL, then: xdstype.RouteURL, thenName: "r2",
			v1: config(scope("s1", "a", "r1"), route("r1", "one"), listener("l", 10001)),
			v2: config(scope("s1", "a", "r1"), scope("s2", "b", "r2"), route("r1", "one"), route("r2", "two"), listener("l", 10001)),
		},
	}
}

func names(n string) []string {
	if n == "" {
		return nil
	}
	return []string{n}
}

// TestX37_order: on a change adding both, the resource the other needs
// comes first, in state of the world and delta.
func TestX37_order(t *testing.T) {
	for name, o := range orders() {
		t.Run(name+"/sotw", func(t *testing.T) {
			p := start(t, o.v1)
			st := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
			// The subscription whose resource exists is answered; the other,
			// named before it exists, is remembered (X21).
			st.Request(o.first, names(o.firstName)...)
			st.Request(o.then, names(o.thenName)...)
			// Only the wildcard one exists: one response.
			resp := st.Recv()
			st.ACK(resp, names(map[string]string{o.first: o.firstName, o.then: o.thenName}[resp.GetTypeUrl()])...)
			p.write(t, o.v2)
			if got := st.Recv().GetTypeUrl(); got != o.first {
				t.Fatalf("first response after the change is %s, want %s", got, o.first)
			}
			if got := st.Recv().GetTypeUrl(); got != o.then {
				t.Fatalf("second response after the change is %s, want %s", got, o.then)
			}
		})
		t.Run(name+"/delta", func(t *testing.T) {
			p := start(t, o.v1)
			st := xdstest.OpenDeltaADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n"))
			sub := func(n string) []string {
				if n == "" {
					return []string{"*"}
				}
				return []string{n}
			}
			st.Subscribe(o.first, sub(o.firstName)...)
			st.Subscribe(o.then, sub(o.thenName)...)
			// Both are answered: the missing name in removed_resources (X33).
			for range 2 {
				st.ACK(st.Recv())
			}
			p.write(t, o.v2)
			if got := st.Recv().GetTypeUrl(); got != o.first {
				t.Fatalf("first response after the change is %s, want %s", got, o.first)
			}
			if got := st.Recv().GetTypeUrl(); got != o.then {
				t.Fatalf("second response after the change is %s, want %s", got, o.then)
			}
		})
	}
}
