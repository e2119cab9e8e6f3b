package kube

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// nodeCacheBytes bounds what each Node the --kube-node-localities watch
// holds: the informer caches every Node of the cluster (a cache cannot
// drop an object by count; MaxNodes bounds the localities read, not the
// cache), so this is what a cluster's size costs. docs/sources.md gives
// the figure measured.
const nodeCacheBytes = 1024

// Each Node held costs under a kibibyte, whatever its labels,
// annotations and managed fields: the informer's cache entry (as the
// transform trims it) and the source's locality of it or, past MaxNodes,
// its note; measured on a cloud provider's names, half of the Nodes past
// the bound.
func TestEachNodeHeldCostsUnderAKibibyte(t *testing.T) {
	const nodes = 20_000
	src, c := nodeSource(t, nodes/2)
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	before := heapInUse()
	for i := range nodes {
		out, err := nodeTransform(cloudNode(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(out); err != nil {
			t.Fatal(err)
		}
		src.setNode(c, out.(metav1.Object))
	}
	per := (heapInUse() - before) / nodes
	runtime.KeepAlive(store)
	runtime.KeepAlive(src)
	t.Logf("%d bytes a Node held (%d Nodes)", per, nodes)
	if len(c.nodes) != nodes/2 || len(c.nodeNotes) != nodes/2 {
		t.Fatalf("%d localities held and %d noted, want %d each", len(c.nodes), len(c.nodeNotes), nodes/2)
	}
	if per > nodeCacheBytes {
		t.Fatalf("%d bytes a Node held, want at most %d", per, nodeCacheBytes)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() int {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int(m.HeapAlloc)
}

// cloudNode is Node i's metadata as a managed cluster's API server sends
// it, every string its own (as decoded from the wire): a GKE-like name,
// the well-known labels, a few annotations and managed fields.
func cloudNode(i int) *metav1.PartialObjectMetadata {
	own := func(s string) string { return strings.Clone(s) }
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{Kind: own("PartialObjectMetadata"), APIVersion: own("meta.k8s.io/v1")},
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("gke-prod-europe-west4-default-pool-%08x-%04d", i*2654435761, i%10000),
			UID:             types.UID(fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", i, i)),
			ResourceVersion: fmt.Sprintf("%d", 123456789+i),
			Labels: map[string]string{
				own(corev1.LabelTopologyRegion): own("europe-west4"), own(corev1.LabelTopologyZone): own("europe-west4-a"),
				own(corev1.LabelHostname): fmt.Sprintf("node-%d", i), own(corev1.LabelInstanceTypeStable): own("e2-standard-4"),
				own(corev1.LabelOSStable): own("linux"), own(corev1.LabelArchStable): own("amd64"),
			},
			Annotations:   map[string]string{own("node.alpha.kubernetes.io/ttl"): own("0"), own("volumes.kubernetes.io/controller-managed-attach-detach"): own("true")},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: own("kubelet"), Operation: metav1.ManagedFieldsOperationUpdate}},
		},
	}
}
