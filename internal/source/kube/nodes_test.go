package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
)

// nodesRBACManifest is the shipped RBAC for --kube-node-localities.
const nodesRBACManifest = "../../../deploy/kubernetes/pylon-kube-nodes-rbac.yaml"

// putNode creates or relabels the Node name with labels.
func putNode(t *testing.T, admin *kubernetes.Clientset, name string, labels map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	api := admin.CoreV1().Nodes()
	if old, err := api.Get(ctx, name, metav1.GetOptions{}); err == nil {
		old.Labels = labels
		if _, err := api.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := api.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// onNodes is shop/web's slice web-a: 10.0.0.1 on node n1 with no zone of
// its own, 10.0.0.2 on n1 in zone zs, 10.0.0.3 on n2.
func onNodes(t *testing.T, admin *kubernetes.Clientset) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	a, b, c := ep("10.0.0.1", yes, yes, no, ""), ep("10.0.0.2", yes, yes, no, "zs"), ep("10.0.0.3", yes, yes, no, "")
	a.NodeName, b.NodeName, c.NodeName = ptr("n1"), ptr("n1"), ptr("n2")
	sl := sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: tcp}}, a, b, c)
	if _, err := admin.DiscoveryV1().EndpointSlices("shop").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func topology(region, zone string) map[string]string {
	return map[string]string{corev1.LabelTopologyRegion: region, corev1.LabelTopologyZone: zone, "team": "payments"}
}

func TestANodesTopologyLabelsAreItsEndpointsLocalityAndARelabelMovesThem(t *testing.T) {
	k, admin := shopCluster(t, "10.9.9.9", "")
	k.Grant(nodesRBACManifest, kubetest.Pylon)
	putNode(t, admin, "n1", topology("r1", "z1"))
	putNode(t, admin, "n2", map[string]string{"team": "web"})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := admin.DiscoveryV1().EndpointSlices("shop").Delete(ctx, "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	onNodes(t, admin)
	src, updates := runClusters(t, Options{Kubeconfig: k.Kubeconfig(kubetest.Pylon), NodeLocalities: true})
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Region: "r1", Zone: "z1", Health: "healthy"},
		{Address: "10.0.0.2", Port: 8080, Region: "r1", Zone: "zs", Health: "healthy"},
		{Address: "10.0.0.3", Port: 8080, Health: "healthy"},
	}})

	// Relabelled, n1 moves its endpoints; n2 labelled gives its own one.
	putNode(t, admin, "n1", topology("r2", "z2"))
	putNode(t, admin, "n2", topology("r3", "z3"))
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Region: "r2", Zone: "z2", Health: "healthy"},
		{Address: "10.0.0.2", Port: 8080, Region: "r2", Zone: "zs", Health: "healthy"},
		{Address: "10.0.0.3", Port: 8080, Region: "r3", Zone: "z3", Health: "healthy"},
	}})
	if st := src.Status().Kubernetes[0]; st.Degraded {
		t.Fatalf("status %+v: degraded with the nodes' RBAC granted", st)
	}
}

func TestWithoutNodeLocalitiesNodesAreNeverListedOrWatched(t *testing.T) {
	// The services' RBAC alone: a list or watch of nodes is forbidden.
	k, admin := shopCluster(t, "10.9.9.9", "")
	putNode(t, admin, "n1", topology("r1", "z1"))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := admin.DiscoveryV1().EndpointSlices("shop").Delete(ctx, "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	onNodes(t, admin)

	with, err := New(Options{Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}, NodeLocalities: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := with.Sync(ctx); err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("Sync with node localities but no RBAC for nodes: err %v, want the refused listing of nodes", err)
	}

	without, err := New(Options{Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := without.Sync(ctx); err != nil {
		t.Fatalf("Sync without node localities: %v", err)
	}
	// Run sends nothing until every informer has synced: a node watch,
	// forbidden, would never sync.
	src, updates := runClusters(t, Options{Kubeconfig: k.Kubeconfig(kubetest.Pylon)})
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Health: "healthy"},
		{Address: "10.0.0.2", Port: 8080, Zone: "zs", Health: "healthy"},
		{Address: "10.0.0.3", Port: 8080, Health: "healthy"},
	}})
	if st := src.Status().Kubernetes[0]; st.Degraded {
		t.Fatalf("status %+v: degraded without node localities", st)
	}
}

func TestANodesWatchCachesItsTopologyLabelsAlone(t *testing.T) {
	in := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}, ObjectMeta: metav1.ObjectMeta{
		Name: "n1", UID: "6f1c2d4e", ResourceVersion: "7", Labels: topology("r1", "z1"),
		Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
	}}
	out, err := nodeTransform(in)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	want := map[string]string{corev1.LabelTopologyRegion: "r1", corev1.LabelTopologyZone: "z1"}
	if got.Name != "n1" || got.ResourceVersion != "7" || got.UID != "" || got.Kind != "" || got.Annotations != nil || got.ManagedFields != nil || len(got.Labels) != 2 ||
		got.Labels[corev1.LabelTopologyRegion] != "r1" || got.Labels[corev1.LabelTopologyZone] != "z1" {
		t.Fatalf("cached %+v, want the name, version and %v alone", got.ObjectMeta, want)
	}
	// A slice's endpoints keep their node only when nodes are read.
	sl := sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, nil, ep("10.0.0.1", yes, yes, no, ""))
	sl.Endpoints[0].NodeName = ptr("n1")
	kept, _ := transformWith(sl, true)
	if n := kept.(*discoveryv1.EndpointSlice).Endpoints[0].NodeName; n == nil || *n != "n1" {
		t.Fatalf("with node localities the endpoint's node is %v, want n1", n)
	}
}

// nodeSource is a source of one cluster, connected to nothing, reading
// nodes' localities with at most max of them.
func nodeSource(t *testing.T, max int) (*Source, *cluster) {
	t.Helper()
	c := &cluster{name: "test", services: map[key]*service{}, slices: map[key]*slice{},
		nodes: map[string]locality{}, nodeNotes: map[string]string{}, byNode: map[string]map[key]struct{}{}}
	return &Source{opts: Options{NodeLocalities: true, MaxNodes: max, MaxEndpoints: 100, MaxServices: 100}, log: slog.New(slog.DiscardHandler), check: defaultCheck(t), clusters: []*cluster{c}, changed: make(chan struct{}, 1)}, c
}

func node(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestNodesPastTheBoundOrOfOverlongLabelsAreNotReadAndSaidSo(t *testing.T) {
	src, c := nodeSource(t, 1)
	src.setService(c, svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80}))
	a, b, d := ep("10.0.0.1", yes, yes, no, ""), ep("10.0.0.2", yes, yes, no, ""), ep("10.0.0.3", yes, yes, no, "")
	a.NodeName, b.NodeName, d.NodeName = ptr("n1"), ptr("n2"), ptr("n3")
	src.setSlice(c, sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: tcp}}, a, b, d))
	if !src.setNode(c, node("n1", topology("r1", "z1"))) {
		t.Fatal("n1's labels changed nothing")
	}
	if !src.setNode(c, node("n2", topology("r2", "z2"))) {
		t.Fatal("n2 past the bound changed nothing: what is dropped is not said until another change")
	}
	src.setNode(c, node("n3", topology("r3", strings.Repeat("z", 64))))
	want := map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Region: "r1", Zone: "z1", Health: "healthy"},
		{Address: "10.0.0.2", Port: 8080, Health: "healthy"},
		{Address: "10.0.0.3", Port: 8080, Health: "healthy"},
	}}
	files, _ := src.files()
	if got := services(t, source.Update{Files: files}); !cmp.Equal(want, got) {
		t.Fatalf("served %v, want %v", got, want)
	}
	st := src.Status().Kubernetes[0]
	if st.Dropped != 2 || !strings.Contains(st.DroppedNote, "node n2: over the 1 nodes") || !strings.Contains(st.DroppedNote, "node n3: a topology label is 64 bytes") {
		t.Fatalf("status: %d dropped, %q; want n2 past the bound and n3's label named", st.Dropped, st.DroppedNote)
	}
	// n1 gone, n2's labels are read at its next change.
	if !src.deleteNode(c, "n1") {
		t.Fatal("deleting n1 changed nothing")
	}
	src.setNode(c, node("n2", topology("r2", "z2")))
	files, _ = src.files()
	if got := services(t, source.Update{Files: files}); got["shop/web:http"][1].Region != "r2" || got["shop/web:http"][0].Region != "" {
		t.Fatalf("served %v, want n2's endpoint in r2 and n1's in none", got)
	}
}
