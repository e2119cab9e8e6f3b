package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
)

// preferCloseConfig is xds:///greeter over backend-0 in zone-a and
// backend-1 in zone-b, traffic_distribution PreferClose, with a node
// group per zone and a default one; zoneA is backend-0's health.
func preferCloseConfig(ports []int, zoneA string) string {
	return fmt.Sprintf(`groups:
- name: zone-a
  match: { zone: zone-a }
- name: zone-b
  match: { zone: zone-b }
- name: anywhere
  default: true
services:
- name: greeter
  protocol: grpc
  traffic_distribution: PreferClose
  endpoints:
  - { address: 127.0.0.1, port: %d, region: r1, zone: zone-a, health: %s }
  - { address: 127.0.0.1, port: %d, region: r1, zone: zone-b, health: healthy }
grpc:
- target: greeter
  to: [{ service: greeter }]
`, ports[0], zoneA, ports[1])
}

// grpcClientAt is grpcClient for a node in locality (region/zone).
func (p *pylon) grpcClientAt(t *testing.T, nodeID, locality string) greeter {
	t.Helper()
	var bs, stderr bytes.Buffer
	args := []string{"bootstrap", "--grpc", "--node-id", nodeID, "--node-cluster", "e2e", "--locality", locality, "--xds-address", p.xdsAddr}
	if code := cli.Execute(context.Background(), args, &bs, &stderr); code != 0 {
		t.Fatalf("pylon bootstrap --grpc: exit %d: %s", code, stderr.String())
	}
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bs.Bytes())
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return greeter{testgrpc.NewTestServiceClient(conn)}
}

// TestPreferCloseSendsAZonesRPCsToItsZoneAndFailsOverToTheRest: a grpc-go
// client in zone-a's node group sends every RPC to zone-a's backend while
// it is healthy, and to zone-b's once it is not (priority 1, the
// fallback); zone-b's client stays in zone-b; a client of no zone's group
// reaches both.
func TestPreferCloseSendsAZonesRPCsToItsZoneAndFailsOverToTheRest(t *testing.T) {
	ports := startBackends(t, 2)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, preferCloseConfig(ports, "healthy"))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("refused: %s", st.Refused.Error)
	}
	a := p.grpcClientAt(t, "client-a", "r1/zone-a")
	b := p.grpcClientAt(t, "client-b", "r1/zone-b")
	anywhere := p.grpcClient(t, "client-anywhere")
	if !onlyTo(func() string { return a.call(t) }, "backend-0", 30) {
		t.Fatal("zone-a's client sent an RPC out of zone-a while its backend is healthy")
	}
	if !onlyTo(func() string { return b.call(t) }, "backend-1", 30) {
		t.Fatal("zone-b's client sent an RPC out of zone-b while its backend is healthy")
	}
	seen := map[string]bool{}
	if !eventually(func() bool { seen[anywhere.call(t)] = true; return len(seen) == 2 }) {
		t.Fatalf("the client of no zone reached %v, want both backends at priority 0", seen)
	}

	// zone-a's backend unhealthy: zone-a's client fails over to zone-b.
	writeAtomically(t, cfg, preferCloseConfig(ports, "unhealthy"))
	if !eventually(func() bool { return onlyTo(func() string { return a.call(t) }, "backend-1", 10) }) {
		t.Fatal("zone-a's client did not fail over to zone-b with zone-a's backend unhealthy")
	}
	// Healthy again: back to its own zone.
	writeAtomically(t, cfg, preferCloseConfig(ports, "healthy"))
	if !eventually(func() bool { return onlyTo(func() string { return a.call(t) }, "backend-0", 10) }) {
		t.Fatal("zone-a's client did not come back to zone-a with its backend healthy again")
	}
}

// kubeZones is kubeGreeter with a node group per zone.
const kubeZones = `groups:
- name: zone-a
  match: { zone: zone-a }
- name: anywhere
  default: true
` + kubeGreeter

// TestAKubernetesPreferCloseServiceSendsAZonesRPCsToTheEndpointsOnItsNodes:
// a Service of trafficDistribution PreferClose whose slice gives its
// endpoints no zone, on Nodes labelled zone-a and zone-b, read with
// --kube-node-localities: a grpc-go client in zone-a's group reaches the
// endpoint on the zone-a Node alone, and the other once that one is not
// ready.
func TestAKubernetesPreferCloseServiceSendsAZonesRPCsToTheEndpointsOnItsNodes(t *testing.T) {
	k, admin := kubeCluster(t)
	k.Grant("../../deploy/kubernetes/pylon-kube-nodes-rbac.yaml", kubetest.Pylon)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()
	ports := startBackends(t, 2)
	for name, zone := range map[string]string{"node-a": "zone-a", "node-b": "zone-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyRegion: "r1", corev1.LabelTopologyZone: zone}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter", Namespace: "shop"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 50051, AppProtocol: ptrTo("grpc")}},
			TrafficDistribution: ptrTo(corev1.ServiceTrafficDistributionPreferClose)},
	}
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onNode := func(name string, port int, node string, ready bool) *discoveryv1.EndpointSlice {
		e := endpoint(testNet+"10", ready, ready, false)
		e.Zone, e.NodeName = nil, ptrTo(node)
		return greeterSlice(name, port, e)
	}
	slices := admin.DiscoveryV1().EndpointSlices("shop")
	a, err := slices.Create(ctx, onNode("greeter-a", ports[0], "node-a", true), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slices.Create(ctx, onNode("greeter-b", ports[1], "node-b", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, kubeZones)
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, Kube: daemon.KubeOptions{
		Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}, NodeLocalities: true,
	}})
	client := kubeGRPCClientAt(t, p, "kube-client-a", "r1/zone-a")
	call := func() string { return client.call(t) }
	if !onlyTo(call, "backend-0", 30) {
		t.Fatal("zone-a's client sent an RPC out of zone-a while the endpoint on its zone's Node is ready")
	}

	// The zone-a endpoint not ready: zone-a's client fails over.
	a.Endpoints[0] = onNode("greeter-a", ports[0], "node-a", false).Endpoints[0]
	if _, err := slices.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return onlyTo(call, "backend-1", 10) }) {
		t.Fatal("zone-a's client did not fail over to zone-b's endpoint")
	}
}

// kubeGRPCClientAt is kubeGRPCClient of xds:///greeter for a node in
// locality (region/zone).
func kubeGRPCClientAt(t *testing.T, p *pylon, nodeID, locality string) greeter {
	t.Helper()
	var bs, stderr bytes.Buffer
	args := []string{"bootstrap", "--grpc", "--node-id", nodeID, "--node-cluster", "e2e", "--locality", locality, "--xds-address", p.xdsAddr}
	if code := cli.Execute(context.Background(), args, &bs, &stderr); code != 0 {
		t.Fatalf("pylon bootstrap --grpc: exit %d: %s", code, stderr.String())
	}
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bs.Bytes())
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(loopbackDialer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return greeter{testgrpc.NewTestServiceClient(conn)}
}
