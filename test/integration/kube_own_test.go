package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
)

// TestWhatTheFilesHoldIsTheirsAndTheClustersClashIsDropped: an endpoint
// the files list for a cluster's service that one of its slices carries
// too, and a raw Cluster the files name like a cluster's service, are
// the files': the cluster's endpoint, or service, is dropped and said
// so, and the files' changes publish.
func TestWhatTheFilesHoldIsTheirsAndTheClustersClashIsDropped(t *testing.T) {
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
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, kubeGreeter)
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, Kube: daemon.KubeOptions{Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}}})
	client := kubeGRPCClient(t, p, "kube-own-client", "greeter")
	call := func() string { return client.call(t) }
	if !eventually(func() bool { return onlyTo(call, "backend-0", 5) }) {
		t.Fatal("the RPCs do not reach the cluster's endpoint (backend-0)")
	}

	// The files list the slice's endpoint for the cluster's service, and
	// another: the slice's is dropped, the files' both served.
	writeAtomically(t, cfg, kubeGreeter+fmt.Sprintf("endpoints:\n- { service: \"shop/greeter:grpc\", address: %s10, port: %d }\n- { service: \"shop/greeter:grpc\", address: %s11, port: %d }\n",
		testNet, ports[0], testNet, ports[1]))
	if !eventually(func() bool { return servedBy(call, 20)["backend-1"] }) {
		t.Fatalf("the files' endpoints of the cluster's service did not publish: refused %+v", p.status(t).Refused)
	}
	if st := p.clusterState(t, "cluster"); st.Dropped != 1 || !strings.Contains(st.DroppedNote, testNet+"10") {
		t.Fatalf("cluster status %+v: want the slice's endpoint %s10 dropped and named", st, testNet)
	}

	// The files name a raw Cluster like the cluster's service, and route
	// to a service of their own: the cluster's is dropped.
	version := p.status(t).Version
	writeAtomically(t, cfg, strings.Replace(kubeGreeter, "shop/greeter:grpc", "own-greeter", 1)+fmt.Sprintf(`services:
- { name: own-greeter, protocol: grpc, endpoints: [{ address: %s11, port: %d }] }
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: "shop/greeter:grpc"
  connect_timeout: 1s
  type: STATIC
`, testNet, ports[1]))
	if !eventually(func() bool { st := p.status(t); return st.Version != version && st.Refused == nil }) {
		t.Fatalf("the files' raw Cluster named like the cluster's service did not publish: refused %+v", p.status(t).Refused)
	}
	if st := p.clusterState(t, "cluster"); st.Dropped != 1 || !strings.Contains(st.DroppedNote, "shop/greeter:grpc: the config's own files define a Cluster") {
		t.Fatalf("cluster status %+v: want the Service dropped, naming the files' Cluster", st)
	}
	if !eventually(func() bool { return onlyTo(call, "backend-1", 5) }) {
		t.Fatal("the RPCs do not reach the files' own-greeter (backend-1)")
	}
}
