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
