package explain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestExplainFlagsRouteGRPCClientsNACK: a RouteConfiguration Envoy takes
// and grpc-go rejects (a retry policy of zero retries) reaches a real
// grpc-go client, which NACKs it; `pylon explain` of an RPC on that
// target says so, naming the route and the field, and that the client
// keeps the version it ran before. So for a Listener (X-Forwarded-For
// hops trusted).
func TestExplainFlagsRouteGRPCClientsNACK(t *testing.T) {
	bs := startBackends(t, 6)
	p := startPylon(t, "")
	const node = "explain-nack"
	p.cli(t, "apply", "-f", writeConfig(t, rawConfig(bs.ports)))
	greeter := p.client(t, node, "greeter")
	warm(t, greeter, rpc{method: "UnaryCall"})

	bad := strings.Replace(rawConfig(bs.ports), "    - name: default\n      match: { prefix: \"\" }\n      route: { cluster: c0 }\n",
		"    - name: default\n      match: { prefix: \"\" }\n      route: { cluster: c0, retry_policy: { retry_on: unavailable, num_retries: 0 } }\n", 1)
	if bad == rawConfig(bs.ports) {
		t.Fatal("the test's edit of the default route did not apply")
	}
	p.cli(t, "apply", "-f", writeConfig(t, bad))
	detail := waitNACK(t, p, node, "RDS")
	if !strings.Contains(detail, "num_retries") {
		t.Fatalf("grpc-go NACKed the route configuration, but not for num_retries: %s", detail)
	}

	e := explainRPC(t, p, nil, node, "greeter", rpc{method: "UnaryCall", headers: []string{"x-code: 123"}})
	if len(e.Result.GRPCNACK) == 0 || !strings.Contains(strings.Join(e.Result.GRPCNACK, "\n"), `route "default"`) ||
		!strings.Contains(strings.Join(e.Result.GRPCNACK, "\n"), "num_retries") {
		t.Errorf("explain -o json of an RPC on a route configuration grpc-go NACKs: grpcNack %q, want the default route's num_retries named", e.Result.GRPCNACK)
	}
	out := p.cli(t, "explain", "--node", node, "xds:///greeter/grpc.testing.TestService/UnaryCall", "-H", "x-code: 123")
	if !strings.Contains(out, "gRPC NACK") || !strings.Contains(out, "keeps the version it last ACKed") {
		t.Errorf("explain's text does not flag the NACK:\n%s", out)
	}

	// The listener too: a connection manager trusting X-Forwarded-For hops
	// (gRFC A41), on a node whose client took the listener before.
	const other = "explain-nack-lds"
	p.cli(t, "apply", "-f", writeConfig(t, rawConfig(bs.ports)))
	warm(t, p.client(t, other, "greeter"), rpc{method: "UnaryCall"})
	p.cli(t, "apply", "-f", writeConfig(t, strings.Replace(rawConfig(bs.ports), "      stat_prefix: greeter\n", "      stat_prefix: greeter\n      xff_num_trusted_hops: 1\n", 1)))
	if detail := waitNACK(t, p, other, "LDS"); !strings.Contains(detail, "xff_num_trusted_hops") {
		t.Fatalf("grpc-go NACKed the listener, but not for xff_num_trusted_hops: %s", detail)
	}
	e = explainRPC(t, p, nil, other, "greeter", rpc{method: "UnaryCall", headers: []string{"x-code: 123"}})
	if got := strings.Join(e.Result.GRPCNACK, "\n"); !strings.Contains(got, `listener "greeter": xff_num_trusted_hops is 1`) {
		t.Errorf("explain -o json of an RPC through a listener grpc-go NACKs: grpcNack %q", got)
	}
}

// waitNACK waits, within bound, until node's stream NACKs typ, and returns
// the client's reason.
func waitNACK(t *testing.T, p *pylon, node, typ string) string {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		var body struct {
			Streams []struct {
				Types []struct {
					Type     string `json:"type"`
					State    string `json:"state"`
					LastNACK *struct {
						Detail string `json:"errorDetail"`
					} `json:"lastNack"`
				} `json:"types"`
			} `json:"streams"`
		}
		if err := json.Unmarshal([]byte(p.cli(t, "status", node, "-o", "json")), &body); err != nil {
			t.Fatal(err)
		}
		for _, s := range body.Streams {
			for _, ty := range s.Types {
				if ty.Type == typ && ty.State == "NACKED" && ty.LastNACK != nil {
					return ty.LastNACK.Detail
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not NACK %s within %v", node, typ, bound)
		}
		time.Sleep(50 * time.Millisecond) // polling another component's state: the client's NACK reaches the server's tracker
	}
}
