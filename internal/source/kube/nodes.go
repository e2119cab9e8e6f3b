package kube

import (
	"context"
	"fmt"
	"sort"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
)

// DefaultMaxNodes is Options.MaxNodes' default: above the largest
// clusters the managed services allow.
const DefaultMaxNodes = 50_000

// nodesGVR is the resource a node's metadata is read from.
var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// locality is what a Node's topology labels say of its endpoints.
type locality struct{ region, zone string }

// nodeLocality reads a Node's topology labels, and says why it is not
// read ("" when it is): a value over a label's 63 bytes (the API refuses
// it; a bound all the same, as it is copied into every EDS locality).
func nodeLocality(m metav1.Object) (locality, string) {
	l := m.GetLabels()
	loc := locality{region: l[corev1.LabelTopologyRegion], zone: l[corev1.LabelTopologyZone]}
	for _, v := range []string{loc.region, loc.zone} {
		if len(v) > maxZoneBytes {
			return locality{}, fmt.Sprintf("node %s: a topology label is %d bytes, over %d: its endpoints are served without its locality", clip(m.GetName()), len(v), maxZoneBytes)
		}
	}
	return loc, ""
}

// nodeTransform keeps of a Node's metadata only its name, version and
// topology labels before it is cached: the watch is metadata-only (no
// spec, no status), and its other labels and annotations, its UID and
// its type are dropped. The informer caches every Node of the cluster,
// past MaxNodes too, so each costs what little is kept: the labels' keys
// are the constants and their values one copy of each (a cluster has a
// few zones and thousands of Nodes), about 0.9 KiB a Node in all
// (TestEachNodeHeldCostsUnderAKibibyte).
func nodeTransform(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	var labels map[string]string
	for _, l := range []string{corev1.LabelTopologyRegion, corev1.LabelTopologyZone} {
		if v, ok := m.Labels[l]; ok {
			if labels == nil {
				labels = make(map[string]string, 2)
			}
			labels[l] = unique.Make(v).Value()
		}
	}
	return &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion, Labels: labels},
	}, nil
}

// syncNodes lists c's Nodes' metadata, paged, for Sync.
func (s *Source) syncNodes(ctx context.Context, c *cluster) error {
	nodes := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return c.md.Resource(nodesGVR).List(ctx, o)
	})
	return nodes.EachListItem(ctx, metav1.ListOptions{Limit: syncPage}, func(obj runtime.Object) error {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			s.setNode(c, m)
		}
		return nil
	})
}

// startNodes starts c's metadata-only watch of Nodes.
func (s *Source) startNodes(ctx context.Context, c *cluster, w *watch) error {
	f := metadatainformer.NewSharedInformerFactoryWithOptions(c.md, 0, metadatainformer.WithTransform(nodeTransform))
	w.nodeFactory = f
	inf := f.ForResource(nodesGVR).Informer()
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) { s.failed(c, err) }); err != nil {
		return err
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.nodeEvent(c, obj, false) },
		UpdateFunc: func(_, obj any) { s.nodeEvent(c, obj, false) },
		DeleteFunc: func(obj any) { s.nodeEvent(c, obj, true) },
	})
	if err != nil {
		return err
	}
	w.synced, w.nodeStore = append(w.synced, inf.HasSynced), inf.GetStore()
	f.Start(ctx.Done())
	return nil
}

// nodeEvent handles a Node's change, and pokes the loop only when it
// changed what is served: a Node's status changes often, its labels
// seldom.
func (s *Source) nodeEvent(c *cluster, obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	var changed bool
	if deleted {
		changed = s.deleteNode(c, m.GetName())
	} else {
		changed = s.setNode(c, m)
	}
	if changed {
		s.poke()
	}
}

// setNode holds a Node's locality and renders again the slices with
// endpoints on it if it changed; it says whether anything did (what is
// served, or what is dropped).
func (s *Source) setNode(c *cluster, m metav1.Object) bool {
	loc, why := nodeLocality(m)
	name := m.GetName()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := c.nodes[name]
	oldWhy, wasNoted := c.nodeNotes[name]
	delete(c.nodeNotes, name)
	_, held := c.nodes[name]
	switch {
	case why != "":
		delete(c.nodes, name)
		c.nodeNotes[name] = why
	case loc == locality{}:
		delete(c.nodes, name)
	case !held && len(c.nodes) >= s.opts.MaxNodes:
		c.nodeNotes[name] = pastBound
	default:
		c.nodes[name] = loc
	}
	if c.nodes[name] != old {
		s.rerender(c, name)
		return true
	}
	note, noted := c.nodeNotes[name]
	return noted != wasNoted || note != oldWhy
}

// deleteNode forgets a Node; it says whether anything changed.
func (s *Source) deleteNode(c *cluster, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := c.nodes[name]
	_, noted := c.nodeNotes[name]
	delete(c.nodes, name)
	delete(c.nodeNotes, name)
	if held {
		s.rerender(c, name)
	}
	return held || noted
}

// rerender renders again the slices with endpoints on the node name: a
// Node's relabelling renders those alone. s.mu is held.
func (s *Source) rerender(c *cluster, name string) {
	// The keys first: renderSlice files each again under its nodes.
	keys := make([]key, 0, len(c.byNode[name]))
	for k := range c.byNode[name] {
		keys = append(keys, k)
	}
	for _, k := range keys {
		if old := c.slices[k]; old != nil && old.obj != nil {
			s.renderSlice(c, k, old.obj)
		}
	}
}

// index files the slice r (replacing old) under the nodes of its
// endpoints. s.mu is held.
func (c *cluster) index(k key, old, r *slice) {
	if old != nil {
		for _, n := range old.nodes {
			delete(c.byNode[n], k)
			if len(c.byNode[n]) == 0 {
				delete(c.byNode, n)
			}
		}
	}
	if r == nil {
		return
	}
	for _, n := range r.nodes {
		if c.byNode[n] == nil {
			c.byNode[n] = map[key]struct{}{}
		}
		c.byNode[n][k] = struct{}{}
	}
}

// replaceNodes makes c's nodes exactly its node informer's cache. s.mu
// is held.
func (s *Source) replaceNodes(c *cluster, st cache.Store) {
	c.nodes, c.nodeNotes = map[string]locality{}, map[string]string{}
	objs := st.List()
	// In name order, so that the nodes past the bound are the same ones
	// at every relist.
	sort.Slice(objs, func(i, j int) bool {
		a, _ := objs[i].(metav1.Object)
		b, _ := objs[j].(metav1.Object)
		return a != nil && b != nil && a.GetName() < b.GetName()
	})
	for _, obj := range objs {
		m, ok := obj.(metav1.Object)
		if !ok {
			continue
		}
		loc, why := nodeLocality(m)
		switch {
		case why != "":
			c.nodeNotes[m.GetName()] = why
		case loc == locality{}:
		case len(c.nodes) >= s.opts.MaxNodes:
			c.nodeNotes[m.GetName()] = pastBound
		default:
			c.nodes[m.GetName()] = loc
		}
	}
}

// pastBound is the note of a Node past MaxNodes, said in full by
// nodeDrops: a note each would cost a cluster far past the bound some
// hundred bytes a Node.
const pastBound = ""

// nodeDrops adds what of c's nodes is not read to d, in name order; max
// is MaxNodes. s.mu is held.
func (c *cluster) nodeDrops(d *drops, max int) {
	if len(c.nodeNotes) == 0 {
		return
	}
	names := make([]string, 0, len(c.nodeNotes))
	for n := range c.nodeNotes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if note := c.nodeNotes[n]; note != pastBound {
			d.add("%s", note)
			continue
		}
		d.add("node %s: over the %d nodes whose labels are held: its endpoints are served without its locality", clip(n), max)
	}
}

// sliceNodes are the distinct nodes of a slice's endpoints.
func sliceNodes(sl *discoveryv1.EndpointSlice) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range sl.Endpoints {
		if e.NodeName != nil && *e.NodeName != "" && !seen[*e.NodeName] {
			seen[*e.NodeName] = true
			out = append(out, *e.NodeName)
		}
	}
	return out
}
