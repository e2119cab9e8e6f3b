package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
)

// kubeGreeter is the config that routes xds:///greeter to the Kubernetes
// Service greeter's grpc port in namespace shop, which it does not define.
const kubeGreeter = `grpc:
- target: greeter
  to: [{ service: "shop/greeter:grpc" }]
`

// kubeCluster is a real apiserver holding the namespace shop, with the
// shipped RBAC granted to the user Pylon reads it as.
func kubeCluster(t *testing.T) (*kubetest.Server, *kubernetes.Clientset) {
	t.Helper()
	k := kubetest.Start(t)
	k.Grant("../../deploy/kubernetes/pylon-kube-source-rbac.yaml", kubetest.Pylon)
	admin := k.Clientset(kubetest.Admin)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return k, admin
}

func ptrTo[T any](v T) *T { return &v }

// The apiserver refuses loopback addresses in an EndpointSlice, and the
// tests reach nothing but loopback: the slices name addresses of
// TEST-NET-1 (192.0.2.0/24, documentation only), and the gRPC client's
// dialer takes them to 127.0.0.1 on the same port, refusing any other.
const testNet = "192.0.2."

// loopbackDialer dials 192.0.2.x:port as 127.0.0.1:port.
func loopbackDialer(ctx context.Context, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !strings.HasPrefix(host, testNet) {
		return nil, fmt.Errorf("the test dials only %s0/24 (as loopback), not %s", testNet, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
}

// endpoint is a slice's endpoint at addr with its conditions.
func endpoint(addr string, ready, serving, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		Zone:       ptrTo("zone-a"),
	}
}

// greeterSlice is an EndpointSlice of greeter: one endpoint per port (the
// backends all listen on 127.0.0.1).
func greeterSlice(name string, port int, e discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{
			discoveryv1.LabelServiceName: "greeter", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("grpc"), Port: ptrTo(int32(port)), Protocol: ptrTo(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{e},
	}
}

// TestKubernetesServiceReachesGRPCAsEDS: a Service and EndpointSlices
// created through a real apiserver reach grpc-go's xDS client as EDS;
// a slice update moves the traffic; a terminating endpoint drains; a
// deleted Service is refused as a dangling reference, and the last good
// config keeps serving.
func TestKubernetesServiceReachesGRPCAsEDS(t *testing.T) {
	k, admin := kubeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()
	ports := startBackends(t, 2)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter", Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 50051, AppProtocol: ptrTo("grpc")}}},
	}
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slices := admin.DiscoveryV1().EndpointSlices("shop")
	a, err := slices.Create(ctx, greeterSlice("greeter-a", ports[0], endpoint(testNet+"10", true, true, false)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, kubeGreeter)
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, Kube: daemon.KubeOptions{Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}}})
	client := kubeGRPCClient(t, p, "kube-client", "greeter")
	call := func() string { return client.call(t) }
	if got := call(); got != "backend-0" {
		t.Fatalf("first RPC served by %s, want backend-0 (the slice's endpoint)", got)
	}

	// A slice update: its endpoint moves to backend-1.
	a.Ports[0].Port = ptrTo(int32(ports[1]))
	if a, err = slices.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return onlyTo(call, "backend-1", 20) }) {
		t.Fatal("the slice update did not move the RPCs to backend-1")
	}

	// A terminating endpoint that still serves is DRAINING: gRPC sends
	// it nothing new; a second slice's ready endpoint takes the RPCs.
	if _, err := slices.Create(ctx, greeterSlice("greeter-b", ports[0], endpoint(testNet+"11", true, true, false)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Endpoints[0] = endpoint(testNet+"10", false, true, true)
	if _, err = slices.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return onlyTo(call, "backend-0", 20) }) {
		t.Fatal("RPCs still reach the terminating endpoint (backend-1)")
	}
	if dump := p.get(t, "/config"); !strings.Contains(dump, "DRAINING") {
		t.Fatalf("the config dump holds no DRAINING endpoint:\n%.2000s", dump)
	}

	// The Service deleted: the route names a service that is gone, so the
	// change is refused like any dangling reference and the last good
	// config keeps serving.
	if err := admin.CoreV1().Services("shop").Delete(ctx, "greeter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool {
		r := p.status(t).Refused
		return r != nil && strings.Contains(r.Error, `"shop/greeter:grpc"`)
	}) {
		t.Fatalf("deleting the Service was not refused naming shop/greeter:grpc: %+v", p.status(t).Refused)
	}
	if !onlyTo(call, "backend-0", 20) {
		t.Fatal("the last good config stopped serving after the refusal")
	}
}

// TestAServiceTheFilesAndAClusterDefineIsTheFilesAndTheirChangesPublish:
// a Service named like a service of the config files is dropped from the
// cluster's, never overriding the files nor refusing their changes.
func TestAServiceTheFilesAndAClusterDefineIsTheFilesAndTheirChangesPublish(t *testing.T) {
	k, admin := kubeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()
	ports := startBackends(t, 2)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter", Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 50051, AppProtocol: ptrTo("grpc")}}},
	}
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DiscoveryV1().EndpointSlices("shop").Create(ctx, greeterSlice("greeter-a", ports[0], endpoint(testNet+"10", true, true, false)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	own := func(port int) string {
		return kubeGreeter + fmt.Sprintf("services:\n- name: \"shop/greeter:grpc\"\n  protocol: grpc\n  endpoints: [{ address: %s20, port: %d }]\n", testNet, port)
	}
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, kubeGreeter)
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, Kube: daemon.KubeOptions{Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}}})
	client := kubeGRPCClient(t, p, "kube-clash-client", "greeter")
	call := func() string { return client.call(t) }
	if !eventually(func() bool { return onlyTo(call, "backend-0", 5) }) {
		t.Fatal("the RPCs do not reach the cluster's endpoint (backend-0)")
	}
	// The files define the cluster's service too: the files' publish.
	writeAtomically(t, cfg, own(ports[1]))
	if !eventually(func() bool { return onlyTo(call, "backend-1", 5) }) {
		t.Fatalf("the files defining the cluster's service did not publish: refused %+v", p.status(t).Refused)
	}
	if st := p.clusterState(t, "cluster"); st.Dropped != 1 || !strings.Contains(st.DroppedNote, "shop/greeter:grpc") {
		t.Fatalf("cluster status %+v: want the Service dropped and named", st)
	}
	// The files' definition gone, the cluster's service is back.
	writeAtomically(t, cfg, kubeGreeter)
	if !eventually(func() bool { return onlyTo(call, "backend-0", 5) }) {
		t.Fatalf("the cluster's service did not come back: refused %+v", p.status(t).Refused)
	}
}

// kubeGRPCClient is grpcClient's client of xds:///TARGET, dialling the
// slices' TEST-NET-1 addresses on loopback (loopbackDialer).
func kubeGRPCClient(t *testing.T, p *pylon, nodeID, target string) greeter {
	t.Helper()
	var bs, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"bootstrap", "--grpc", "--node-id", nodeID, "--node-cluster", "e2e", "--xds-address", p.xdsAddr}, &bs, &stderr); code != 0 {
		t.Fatalf("pylon bootstrap --grpc: exit %d: %s", code, stderr.String())
	}
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bs.Bytes())
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient("xds:///"+target, grpc.WithResolvers(resolver),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(loopbackDialer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return greeter{testgrpc.NewTestServiceClient(conn)}
}

// TestKubernetesServicesJoinTheStoresConfig: in store mode a route applied
// through the admin API may name a Kubernetes service (the write is
// validated with the cluster's services), and a slice change reaches
// grpc-go while the stored config stays as it was.
func TestKubernetesServicesJoinTheStoresConfig(t *testing.T) {
	k, admin := kubeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()
	ports := startBackends(t, 2)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter", Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 50051}}},
	}
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slices := admin.DiscoveryV1().EndpointSlices("shop")
	a, err := slices.Create(ctx, greeterSlice("greeter-a", ports[0], endpoint(testNet+"10", true, true, false)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	dataDir := t.TempDir()
	p, _ := runPylon(t, daemon.Options{DataDir: dataDir, Kube: daemon.KubeOptions{Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}}})
	p.token = readToken(t, dataDir)
	// The store was seeded with the quickstart's greeter: another target.
	target := strings.Replace(kubeGreeter, "target: greeter", "target: kube-greeter", 1)
	if code, res := p.api(t, "POST", "/v1/apply", target); code != http.StatusOK {
		t.Fatalf("apply a gRPC target to shop/greeter:grpc: %d %v", code, res)
	}
	client := kubeGRPCClient(t, p, "kube-store-client", "kube-greeter")
	call := func() string { return client.call(t) }
	if !eventually(func() bool { return onlyTo(call, "backend-0", 5) }) {
		t.Fatal("the applied target did not reach backend-0 through the slice")
	}
	a.Ports[0].Port = ptrTo(int32(ports[1]))
	if _, err = slices.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return onlyTo(call, "backend-1", 20) }) {
		t.Fatal("the slice update did not move the RPCs to backend-1")
	}
}

// servedBy is the backends n calls reach.
func servedBy(call func() string, n int) map[string]bool {
	got := map[string]bool{}
	for range n {
		got[call()] = true
	}
	return got
}

// clusterState is GET /status's word on the Kubernetes cluster name.
func (p *pylon) clusterState(t *testing.T, name string) source.ClusterStatus {
	t.Helper()
	var body struct {
		Sources source.Status `json:"sources"`
	}
	if err := json.Unmarshal([]byte(p.get(t, "/status")), &body); err != nil {
		t.Fatal(err)
	}
	for _, c := range body.Sources.Kubernetes {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("/status names no cluster %s: %+v", name, body.Sources)
	return source.ClusterStatus{}
}

// TestAClusterAwayKeepsServingItsEndpointsToGRPC: the same Service in two
// clusters is one endpoint set for grpc-go; with the second cluster's
// apiserver stopped, its endpoints are still served (through a change of
// the first cluster's), and /status, pylon status and the metric say it
// is away; back, it is up again and its changes flow.
func TestAClusterAwayKeepsServingItsEndpointsToGRPC(t *testing.T) {
	east, adminEast := kubeCluster(t)
	west, adminWest := kubeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*bound)
	defer cancel()
	ports := startBackends(t, 3)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter", Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 50051, AppProtocol: ptrTo("grpc")}}},
	}
	slice := map[*kubernetes.Clientset]*discoveryv1.EndpointSlice{}
	for i, admin := range []*kubernetes.Clientset{adminEast, adminWest} {
		if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sl, err := admin.DiscoveryV1().EndpointSlices("shop").Create(ctx, greeterSlice("greeter-a", ports[i], endpoint(fmt.Sprint(testNet, 10+i), true, true, false)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		slice[admin] = sl
	}
	move := func(admin *kubernetes.Clientset, port int) {
		t.Helper()
		sl := slice[admin]
		sl.Ports[0].Port = ptrTo(int32(port))
		sl, err := admin.DiscoveryV1().EndpointSlices("shop").Update(ctx, sl, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		slice[admin] = sl
	}

	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, kubeGreeter)
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, Kube: daemon.KubeOptions{
		Clusters:   []string{"east=" + east.Kubeconfig(kubetest.Pylon), "west=" + west.Kubeconfig(kubetest.Pylon)},
		Namespaces: []string{"shop"},
	}})
	client := kubeGRPCClient(t, p, "kube-clusters-client", "greeter")
	call := func() string { return client.call(t) }
	reaches := func(want ...string) func() bool {
		return func() bool {
			got := servedBy(call, 40)
			return len(got) == len(want) && got[want[0]] && got[want[len(want)-1]]
		}
	}
	if !eventually(reaches("backend-0", "backend-1")) {
		t.Fatalf("RPCs do not reach both clusters' endpoints: %v", servedBy(call, 40))
	}

	west.Stop()
	if !eventually(func() bool { return !p.clusterState(t, "west").Connected }) {
		t.Fatalf("/status does not say west is away: %+v", p.clusterState(t, "west"))
	}
	if st := p.clusterState(t, "west"); st.LastError == "" || strings.Contains(st.LastError, "kubetest-pylon-token") {
		t.Fatalf("west's last error in /status is %q: want the cause, without the token", st.LastError)
	}
	if m := p.get(t, "/metrics"); !strings.Contains(m, `pylon_kube_cluster_up{cluster="west"} 0`) || !strings.Contains(m, `pylon_kube_cluster_up{cluster="east"} 1`) {
		t.Fatal("pylon_kube_cluster_up does not say west 0 and east 1")
	}
	if out := p.cli(t, "status"); !strings.Contains(out, "KUBERNETES CLUSTER west UNREACHABLE") || strings.Contains(out, "CLUSTER east") {
		t.Fatalf("pylon status does not head with west away (and east not):\n%s", out)
	}
	// East's change is published with west's last endpoints.
	move(adminEast, ports[2])
	if !eventually(reaches("backend-1", "backend-2")) {
		t.Fatalf("with west away, RPCs do not reach east's new endpoint and west's last: %v", servedBy(call, 40))
	}

	west.Restart()
	if !eventually(func() bool { return p.clusterState(t, "west").Connected }) {
		t.Fatalf("/status does not say west is back: %+v", p.clusterState(t, "west"))
	}
	move(adminWest, ports[0])
	if !eventually(reaches("backend-0", "backend-2")) {
		t.Fatalf("west's change after its return does not reach the RPCs: %v", servedBy(call, 40))
	}
	if m := p.get(t, "/metrics"); !strings.Contains(m, `pylon_kube_cluster_up{cluster="west"} 1`) {
		t.Fatal("pylon_kube_cluster_up does not say west is back")
	}
}
