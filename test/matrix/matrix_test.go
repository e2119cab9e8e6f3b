package matrix

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// roles are the three clients of every cell: a node whose certificate
// the restricted Secrets' policy allows, a node with a verified
// certificate it does not allow, and a client with no certificate
// (--xds-require-client-cert is off).
var roles = []struct{ name, prefix string }{
	{"entitled", "ent"},
	{"unentitled", "oth"},
	{"unverified", "anon"},
}

// TestSafeTogether is issue 30's matrix: {one replica, two on etcd} x
// {plain, mid-stage, halted} x {SotW, delta} x {ADS, per-type} and REST,
// each with the three roles, as a canary (in the rollout's first stage)
// and not. A cell asserts which planted keys its client receives; each
// setup then reads every dump, the CLI and the log for any of them, and
// tries to plant keys outside Secrets.
func TestSafeTogether(t *testing.T) {
	for _, n := range []int{1, 2} {
		replicas := map[int]string{1: "one", 2: "etcd2"}[n]
		t.Run(replicas, func(t *testing.T) {
			for _, state := range []string{"plain", "mid-stage", "halted"} {
				t.Run(state, func(t *testing.T) {
					t.Parallel()
					f := newFleet(t, n, state)
					f.prepare()
					if state == "halted" {
						f.halt(t)
					}
					f.cells(t)
					t.Run("refused", f.refused)
					t.Run("dumps", f.dumps)
					t.Run("cli", f.cliOutputs)
					t.Run("log", f.logs)
				})
			}
		})
	}
}

// cells runs the transports, each with every role as a canary and not.
func (f *fleet) cells(t *testing.T) {
	for ti, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for ri, role := range roles {
				t.Run(role.name, func(t *testing.T) {
					for pi, canary := range []bool{true, false} {
						where := map[bool]string{true: "canary", false: "non-canary"}[canary]
						t.Run(where, func(t *testing.T) {
							t.Parallel()
							c := client{id: fmt.Sprintf("%s-%s-%s", role.prefix, tr.name, where), canary: canary}
							if role.name != "unverified" {
								c.cert = f.cert(t, c.id)
							}
							r := f.reps[(ti+ri+pi)%len(f.reps)]
							got := tr.fetch(t, f, r, c)
							f.check(t, role.name, canary, f.ms.received(t, got), jsonNames(got))
						})
					}
				})
			}
		})
	}
}

// cert is a client certificate proving node id.
func (f *fleet) cert(t *testing.T, id string) *tls.Certificate {
	t.Helper()
	c := f.ca.Issue(t, certstest.Client("spiffe://example.org/ns/"+nodeCluster+"/sa/"+id)).TLS(t)
	return &c
}

// servesPrevious says whether a node is served the previous version, the
// one that still holds the doomed Secret: all of them while halted (the
// stage rolled back), those outside the first stage mid-stage.
func (f *fleet) servesPrevious(canary bool) bool {
	return f.state == "halted" || (f.state == "mid-stage" && !canary)
}

// check compares the markers a client received with what its role may
// have: the entitled node gets the restricted and wrapped Secrets, and the
// doomed one exactly when it is served the version that still holds it
// (its policy, published with that version, allows it); nobody else gets
// any key.
func (f *fleet) check(t *testing.T, role string, canary bool, got []string, names string) {
	t.Helper()
	if role == "unverified" && names != "" {
		t.Errorf("the unverified client was sent Secrets: %s", names)
	}
	var want []string
	if role == "entitled" {
		want = []string{"restricted", "wrapped"}
		if f.servesPrevious(canary) {
			want = append(want, "doomed")
		}
		slices.Sort(want)
	}
	for _, m := range got {
		if !slices.Contains(want, m) {
			t.Errorf("the %s client received the %s key (Secrets sent: %s): %s", role, m, names, f.ms[m].finding)
		}
	}
	for _, m := range want {
		if !slices.Contains(got, m) {
			t.Errorf("the %s client did not receive the %s key (Secrets sent: %s)", role, m, names)
		}
	}
}

// logs: no line of any replica's log shows a key.
func (f *fleet) logs(t *testing.T) {
	for _, r := range f.reps {
		lines := strings.Split(strings.TrimSpace(r.log.String()), "\n")
		if len(lines) < 3 {
			t.Fatalf("%s: only %d log lines captured", r.name, len(lines))
		}
		for _, line := range lines {
			for _, m := range f.ms.in(line) {
				t.Errorf("%s: a log line shows the %s key (%s; finding 8 if the line quotes a NACK's error_detail): %.400s", r.name, m, f.ms[m].finding, excerpt(line, f.ms[m]))
			}
		}
	}
}
