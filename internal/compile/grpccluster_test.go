package compile

import (
	"slices"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const aggregateDoc = `groups:
- name: apps
  match: { cluster: apps }
  clients: [grpc-go]
  scope: { listeners: [greeter] }
services:
- name: primary
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: 50051 }]
- name: fallback
  protocol: grpc
  type: logical_dns
  endpoints: [{ address: localhost, port: 50052 }]
- name: greeter
  protocol: grpc
  aggregate: [primary, fallback]
grpc:
- target: greeter
  to: [{ service: greeter }]
`

// TestAggregateServiceBringsItsServices: a group scoped to a target whose
// service is an aggregate receives the aggregate's services too (a client
// watches each), and a LOGICAL_DNS service has no assignment of its own.
func TestAggregateServiceBringsItsServices(t *testing.T) {
	f, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(aggregateDoc)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := f.Groups()[0]
	if got, want := g.Snapshot.Set(xdstype.ClusterURL).Names(), []string{"fallback", "greeter", "primary"}; !slices.Equal(got, want) {
		t.Errorf("clusters %v, want %v", got, want)
	}
	if got, want := g.Snapshot.Set(xdstype.EndpointURL).Names(), []string{"primary"}; !slices.Equal(got, want) {
		t.Errorf("assignments %v, want %v", got, want)
	}
}

// TestAggregateAndLogicalDNSAreWhatGRPCReads: what gRPC clients NACK of
// an aggregate or LOGICAL_DNS cluster is refused naming the field.
func TestAggregateAndLogicalDNSAreWhatGRPCReads(t *testing.T) {
	doc := strings.Replace(aggregateDoc, "endpoints: [{ address: localhost, port: 50052 }]", "endpoints: [{ address: localhost, port: 50052 }, { address: localhost, port: 50053 }]", 1)
	doc = strings.Replace(doc, "aggregate: [primary, fallback]", "aggregate: [primary, greeter, nowhere, primary]\n  lb: round_robin", 1)
	doc = strings.Replace(doc, "grpc:\n", `- name: envoy-aggregate
  aggregate: [ghost]
- name: nested
  protocol: grpc
  aggregate: [greeter]
- name: typo
  type: strict_dns
  endpoints: [{ address: localhost, port: 50054 }]
grpc:
- target: nested
  to: [{ service: nested }]
`, 1)
	_, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc)}}, nil)
	if err == nil {
		t.Fatal("compiled; want a refusal")
	}
	for _, want := range []string{
		`service "fallback": endpoints: 2 endpoints: a logical_dns service has exactly one`,
		`service "greeter": lb: an aggregate balances by the lb of the service it picks`,
		`service "greeter": aggregate[1]: "greeter" is this service`,
		`service "greeter": aggregate[2]: no service "nowhere"`,
		`service "greeter": aggregate[3]: "primary" again: already aggregate[0]`,
		`service "nested": aggregate[0]: "greeter" is an aggregate itself`,
		`service "envoy-aggregate": aggregate: an aggregate service is for proxyless gRPC clients`,
		`service "typo": type: "strict_dns" is not one of [eds logical_dns]`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}

// TestWeightedRoundRobinKnobsAreWhatGRPCReads: knobs grpc-go would reject,
// raise or read as unset are refused naming the field, as are knobs
// without the policy they tune.
func TestWeightedRoundRobinKnobsAreWhatGRPCReads(t *testing.T) {
	const doc = `services:
- name: greeter
  protocol: grpc
  lb: weighted_round_robin
  weighted_round_robin: { blackout_period: 0s, weight_expiration_period: 0s, weight_update_period: 10ms, error_utilization_penalty: -1 }
  endpoints: [{ address: 127.0.0.1, port: 50051 }]
- name: other
  protocol: grpc
  weighted_round_robin: { blackout_period: 1s }
  endpoints: [{ address: 127.0.0.1, port: 50052 }]
- name: envoy
  lb: weighted_round_robin
  endpoints: [{ address: 127.0.0.1, port: 50053 }]
grpc:
- target: greeter
  to: [{ service: greeter }, { service: other }]
`
	_, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc)}}, nil)
	if err == nil {
		t.Fatal("compiled; want a refusal")
	}
	for _, want := range []string{
		`g.yaml:5: service "greeter": weighted_round_robin.blackout_period: 0: grpc-go reads 0 as unset`,
		`service "greeter": weighted_round_robin.weight_expiration_period: 0: grpc-go reads 0 as unset`,
		`service "greeter": weighted_round_robin.weight_update_period: 10ms: gRPC clients recompute weights at most every 100ms`,
		`service "greeter": weighted_round_robin.error_utilization_penalty: -1: above 0`,
		`service "other": weighted_round_robin: tunes lb: weighted_round_robin, and lb is ""`,
		`service "envoy": lb: "weighted_round_robin" is a proxyless gRPC client's policy`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}

// TestWeightedRoundRobinRefusedForClientsLackingIt: C-core 1.51.1 would
// ignore the policy and grpc-js 1.14 NACK it; a group of either refuses a
// service with lb: weighted_round_robin, and a grpc-go group takes it.
func TestWeightedRoundRobinRefusedForClientsLackingIt(t *testing.T) {
	doc := func(clients string) string {
		return `groups:
- name: apps
  default: true
  clients: [` + clients + `]
services:
- name: greeter
  protocol: grpc
  lb: weighted_round_robin
  endpoints: [{ address: 127.0.0.1, port: 50051 }]
grpc:
- target: greeter
  to: [{ service: greeter }]
`
	}
	if _, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc("grpc-go"))}}, nil); err != nil {
		t.Fatalf("a grpc-go group refused it: %v", err)
	}
	for client, rule := range map[string]string{"grpc-js": "cluster-lb-config", "grpc-core": "cluster-lb-config-core"} {
		_, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc(client))}}, nil)
		if err == nil || !strings.Contains(err.Error(), `Cluster "greeter"`) || !strings.Contains(err.Error(), "(rule "+rule+")") {
			t.Errorf("a %s group: %v; want Cluster \"greeter\" refused by rule %s", client, err, rule)
		}
	}
}
