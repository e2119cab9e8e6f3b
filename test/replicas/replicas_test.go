package replicas_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// serviceDoc is a config document adding a service named name (a cluster
// and its assignment).
func serviceDoc(name string, i int) string {
	return fmt.Sprintf("services:\n- { name: %s, endpoints: [{ address: 10.%d.%d.%d, port: 8080 }] }\n", name, i>>16&255, i>>8&255, i&255)
}

// holdsCluster is a waitFor condition: the proxy holds cluster name and
// its assignment.
func holdsCluster(name string) func(*envoy) bool {
	return func(e *envoy) bool {
		_, c := e.held[xdstype.ClusterURL][name]
		_, a := e.held[xdstype.EndpointURL][name]
		return c && a
	}
}

// Issue 14 item 2: a write through replica A reaches the proxies of
// replica C, grpc-go's and the scripted Envoys' (SotW and delta), and
// every replica serves the same store revision under identical versions:
// the same version_info per type to SotW clients of A, B and C, the same
// version per resource to delta clients.
func TestWriteReachesEveryReplica(t *testing.T) {
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	a, b, c := f.start("replica-a"), f.start("replica-b"), f.start("replica-c")
	all := []*replica{a, b, c}
	one, two := startBackend(t, "backend-1"), startBackend(t, "backend-2")
	sameVersion(t, all, a.apply(greeterDoc(one)).Version)

	sotw, delta := map[string]*envoy{}, map[string]*envoy{}
	for _, r := range all {
		sotw[r.id] = startEnvoy(t, r.xdsAddr, "sotw-of-"+r.id, false)
		delta[r.id] = startEnvoy(t, r.xdsAddr, "delta-of-"+r.id, true)
	}
	g := newGreeter(t, c.xdsAddr, "grpc-of-c")
	g.reaches("backend-1")
	for _, e := range append(values(sotw), values(delta)...) {
		e.ready("backend", "greeter")
	}

	// The write, through A: a new service, and the greeter moved to
	// backend-2.
	res := a.apply(greeterDoc(two) + serviceDoc("fleet-api", 7))
	g.reaches("backend-2")
	sotw[c.id].waitFor("the cluster written through A", holdsCluster("fleet-api"))
	delta[c.id].waitFor("the cluster written through A", holdsCluster("fleet-api"))
	sameVersion(t, all, res.Version)

	// Identical versions everywhere, once every client has settled (a
	// replica publishing other versions never gets there).
	for _, clients := range []map[string]*envoy{sotw, delta} {
		for _, e := range clients {
			e.waitFor("the cluster written through A", holdsCluster("fleet-api"))
		}
		var want map[string]map[string]string
		var wantV map[string]string
		waitShow(t, "every replica's clients holding the same versions", func() bool {
			want, wantV = clients[a.id].holding(), clients[a.id].versions()
			for _, r := range []string{b.id, c.id} {
				if !equalHeld(clients[r].holding(), want) || !maps.Equal(clients[r].versions(), wantV) {
					return false
				}
			}
			return true
		}, func() string {
			return fmt.Sprintf("A's client:\n%v\nB's client:\n%v\nC's client:\n%v", clients[a.id], clients[b.id], clients[c.id])
		})
		for id, e := range clients {
			if got := e.identifier(); got != id {
				t.Errorf("%s's last response names control plane %q, want %q", e.node, got, id)
			}
		}
	}
}

func values(m map[string]*envoy) []*envoy {
	var out []*envoy
	for _, e := range m {
		out = append(out, e)
	}
	return out
}

func equalHeld(a, b map[string]map[string]string) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
}
