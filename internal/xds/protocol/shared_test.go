package protocol

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// These tests look inside the planner: that streams in the same state share
// one copy of it, and that a push to them is planned once. The wire
// behaviour of the same paths is what the protocol and make-before-break
// tests check.

// world is n EDS clusters with one-endpoint assignments (the port of
// cluster i is base+i) and a route "main" to route.
func world(t *testing.T, reg *xdstype.Registry, n int, base uint32, route string) *snapshot.Snapshot {
	t.Helper()
	ads := &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	var inputs []xdstype.Resource
	add := func(url string, m proto.Message) {
		inputs = append(inputs, xdstype.Resource{Type: reg.Lookup(url), Name: xdstype.NameOf(m), Message: m})
	}
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		add(xdstype.ClusterURL, &clusterv3.Cluster{
			Name:                 name,
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads},
		})
		add(xdstype.EndpointURL, &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: base + uint32(i)},
					}}},
				}},
			}}}},
		})
	}
	add(xdstype.RouteURL, &routev3.RouteConfiguration{Name: "main", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: route}}},
		}},
	}}})
	snap, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// bareStream is a stream's planning state without a stream: its watches
// answer requests and plan responses directly.
type bareStream struct {
	cfg     *PlanConfig
	reg     *xdstype.Registry
	watches map[string]*Watch
	nonce   int
}

func newBareStream(reg *xdstype.Registry, share *Sharing) *bareStream {
	cfg := NewPlanConfig(reg.Ranked(), share, 15*time.Second)
	return &bareStream{cfg: &cfg, reg: reg, watches: map[string]*Watch{}}
}

// at is the stream's watch of typeURL, nil before a request of it.
func (b *bareStream) at(typeURL string) *Watch { return b.watches[typeURL] }

// view is what the stream's planner sees: the types the client asked for.
func (b *bareStream) view(typeURL string) Holdings {
	if w := b.watches[typeURL]; w != nil && w.Started {
		return w
	}
	return nil
}

func (b *bareStream) planner() *Planner {
	p := NewPlanner(b.view, b.cfg, time.Now(), time.Time{})
	return &p
}

// request applies a request for typeURL and returns the response it is
// owed, or nil.
func (b *bareStream) request(t *testing.T, snap *snapshot.Snapshot, typeURL, nonce, version string, names ...string) *discoveryv3.DiscoveryResponse {
	t.Helper()
	w := b.watches[typeURL]
	if w == nil {
		nw := NewWatch(b.reg.Lookup(typeURL), b.cfg.share)
		w = &nw
		b.watches[typeURL] = w
	}
	_, owe := w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResponseNonce: nonce, VersionInfo: version, ResourceNames: names}, snap)
	if !owe {
		return nil
	}
	o, _ := w.Plan(b.planner(), snap.Set(typeURL))
	return b.respond(w, o, snap)
}

// push plans typeURL for snap as a publish does, and returns the response,
// nil when nothing changed, and the plan.
func (b *bareStream) push(snap *snapshot.Snapshot, typeURL string) (*discoveryv3.DiscoveryResponse, Outcome) {
	w := b.watches[typeURL]
	o, changed := w.Plan(b.planner(), snap.Set(typeURL))
	if !changed {
		return nil, o
	}
	return b.respond(w, o, snap), o
}

func (b *bareStream) respond(w *Watch, o Outcome, snap *snapshot.Snapshot) *discoveryv3.DiscoveryResponse {
	b.nonce++
	return w.Response(o, fmt.Sprint(b.nonce), false)
}

// ack answers resp, repeating the subscription.
func (b *bareStream) ack(t *testing.T, snap *snapshot.Snapshot, resp *discoveryv3.DiscoveryResponse, names ...string) {
	t.Helper()
	if again := b.request(t, snap, resp.TypeUrl, resp.Nonce, resp.VersionInfo, names...); again != nil {
		t.Fatalf("an ACK was answered with %d resources", len(again.Resources))
	}
}

// soloPlanner returns a planner for a stream whose only type is w's.
func soloPlanner(cfg *PlanConfig, w *DeltaWatch) *Planner {
	view := func(typeURL string) Holdings {
		if typeURL == w.Type.URL && w.Started {
			return w
		}
		return nil
	}
	p := NewPlanner(view, cfg, time.Now(), time.Time{})
	return &p
}

// testPlanConfig is a server's planning constants over share.
func testPlanConfig(reg *xdstype.Registry, share *Sharing) *PlanConfig {
	cfg := NewPlanConfig(reg.Ranked(), share, 15*time.Second)
	return &cfg
}

func samePointer[M any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestSharedStateAcrossStreams(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	names := []string{"c0", "c1", "c2", "c3"}
	v1 := world(t, reg, 4, 9000, "c0")
	var streams []*bareStream
	for range 3 {
		b := newBareStream(reg, share)
		cds := b.request(t, v1, xdstype.ClusterURL, "", "")
		b.ack(t, v1, cds)
		eds := b.request(t, v1, xdstype.EndpointURL, "", "", names...)
		if len(eds.Resources) != 4 {
			t.Fatalf("first EDS response holds %d assignments, want 4", len(eds.Resources))
		}
		b.ack(t, v1, eds, names...)
		streams = append(streams, b)
	}
	a, b := streams[0], streams[1]
	for _, url := range []string{xdstype.ClusterURL, xdstype.EndpointURL} {
		if a.at(url).HeldAs == nil || a.at(url).HeldAs != b.at(url).HeldAs {
			t.Fatalf("%s: streams holding the same set do not share it (%p, %p)", url, a.at(url).HeldAs, b.at(url).HeldAs)
		}
		if !samePointer(a.at(url).Held, b.at(url).Held) || !samePointer(a.at(url).Acked, b.at(url).Acked) {
			t.Fatalf("%s: held or acked maps are per stream", url)
		}
		if a.at(url).Sub != b.at(url).Sub {
			t.Fatalf("%s: one subscription, two copies", url)
		}
	}

	// One assignment changes: every stream takes one shared transition
	// and is sent exactly that assignment.
	changed := world(t, reg, 4, 8000, "c0").Set(xdstype.EndpointURL).Get("c2")
	v2 := withResource(t, reg, v1, changed)
	var steps []*Transition
	for _, s := range streams {
		if resp, _ := s.push(v2, xdstype.ClusterURL); resp != nil {
			t.Fatalf("CDS is unchanged but %d clusters were sent", len(resp.Resources))
		}
		resp, o := s.push(v2, xdstype.EndpointURL)
		if o.step == nil {
			t.Fatal("the push did not take the shared transition")
		}
		steps = append(steps, o.step)
		want := &discoveryv3.DiscoveryResponse{
			VersionInfo: v2.Set(xdstype.EndpointURL).Version(),
			TypeUrl:     xdstype.EndpointURL,
			Resources:   []*anypb.Any{changed.ForSotW(false)},
			Nonce:       resp.Nonce,
		}
		if diff := cmp.Diff(want, resp, protocmp.Transform()); diff != "" {
			t.Fatalf("EDS response (-want +got):\n%s", diff)
		}
		s.ack(t, v2, resp, names...)
	}
	if steps[0] != steps[1] || steps[1] != steps[2] {
		t.Fatal("each stream computed its own transition")
	}
}

// withResource returns snap with r in place of its namesake.
func withResource(t *testing.T, reg *xdstype.Registry, snap *snapshot.Snapshot, r *snapshot.Resource) *snapshot.Snapshot {
	t.Helper()
	var inputs []xdstype.Resource
	for _, set := range snap.Sets() {
		for _, n := range set.Names() {
			m := set.Get(n).Message
			if set.Type().URL == xdstype.EndpointURL && n == r.Name {
				m = r.Message
			}
			inputs = append(inputs, xdstype.Resource{Type: set.Type(), Name: n, Message: m})
		}
	}
	out, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A change the shared transition cannot carry, because make-before-break
// holds it back, takes the full plan: the route to a cluster the client
// has not ACKed waits, and the stream leaves the shared state.
func TestSharedTransitionDeclinesHolds(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	v1 := world(t, reg, 2, 9000, "c0")
	s := newBareStream(reg, share)
	cds := s.request(t, v1, xdstype.ClusterURL, "", "")
	s.ack(t, v1, cds)
	eds := s.request(t, v1, xdstype.EndpointURL, "", "", "c0", "c1")
	s.ack(t, v1, eds, "c0", "c1")
	rds := s.request(t, v1, xdstype.RouteURL, "", "", "main")
	s.ack(t, v1, rds, "main")

	// c2 is new and the route now sends to it: CDS and EDS go first, the
	// route waits until the client has ACKed both.
	v2 := world(t, reg, 3, 9000, "c2")
	cds2, _ := s.push(v2, xdstype.ClusterURL)
	if len(cds2.Resources) != 3 {
		t.Fatalf("CDS: %d clusters, want 3", len(cds2.Resources))
	}
	resp, o := s.push(v2, xdstype.RouteURL)
	if resp != nil || o.step != nil {
		t.Fatalf("the route went out before its cluster was ACKed (shared step: %v)", o.step != nil)
	}
	if !sameVersion(o.Next["main"], v1.Set(xdstype.RouteURL).Get("main")) {
		t.Fatal("the planned route is not the one the client has")
	}
	if s.at(xdstype.RouteURL).HeldAs == nil {
		t.Fatal("the stream did not hold the shared route set: nothing was declined")
	}
}

func TestWeakCacheDropsUnusedEntries(t *testing.T) {
	var c WeakCache[int, [64]byte]
	keep := c.Get(1, func() *[64]byte { return new([64]byte) })
	for i := 2; i <= 10; i++ {
		c.Get(i, func() *[64]byte { return new([64]byte) })
	}
	if again := c.Get(1, func() *[64]byte { t.Fatal("rebuilt a live entry"); return nil }); again != keep {
		t.Fatal("a live entry was not shared")
	}
	if n := collectedDownTo(c.size, 1); n != 1 {
		t.Fatalf("%d entries after their values went, want 1 (the one still used)", n)
	}
	runtime.KeepAlive(keep)
}

// collectedDownTo runs the garbage collector until size reports want, at
// most 200 times in about as many milliseconds (cleanups run after a
// collection, on their own goroutine), and returns the last size.
func collectedDownTo(size func() int, want int) int {
	for range 200 {
		if size() == want {
			break
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return size()
}

// deltaRound sends w what it is owed for snap and ACKs it, returning the
// plan that was sent.
func deltaRound(t *testing.T, cfg *PlanConfig, w *DeltaWatch, snap *snapshot.Snapshot, nonce string) DeltaPlan {
	t.Helper()
	set := snap.Set(w.Type.URL)
	d := w.Plan(soloPlanner(cfg, w), set, true, false)
	w.SentResponse(nonce, set.Version(), set, d, time.Now())
	if v, _ := w.Answered(nonce, false); v != set.Version() {
		t.Fatalf("ACK of %s answered version %q, want %q", nonce, v, set.Version())
	}
	return d
}

func TestDeltaSharedStateAcrossStreams(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	names := []string{"c0", "c1", "c2", "c3"}
	v1 := world(t, reg, 4, 9000, "c0")
	changed := world(t, reg, 4, 8000, "c0").Set(xdstype.EndpointURL).Get("c2")
	v2 := withResource(t, reg, v1, changed)
	var watches []*DeltaWatch
	var steps []*Transition
	for range 3 {
		st := testPlanConfig(reg, share)
		nw := NewDeltaWatch(reg.Lookup(xdstype.EndpointURL), share)
		w := &nw
		w.Subscribe(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNamesSubscribe: names}, v1.Set(xdstype.EndpointURL))
		if d := deltaRound(t, st, w, v1, "1"); len(d.Resources) != 4 {
			t.Fatalf("first response: %d assignments, want 4", len(d.Resources))
		}
		d := deltaRound(t, st, w, v2, "2")
		if d.Step == nil {
			t.Fatal("the push did not take the shared transition")
		}
		if len(d.Resources) != 1 || d.Resources[0].Name != "c2" || d.Resources[0].Version != changed.Version || len(d.Removed) != 0 {
			t.Fatalf("sent %d resources and removed %v, want exactly c2 at %s", len(d.Resources), d.Removed, changed.Version)
		}
		steps = append(steps, d.Step)
		watches = append(watches, w)
	}
	a, b := watches[0], watches[1]
	if a.HeldAs == nil || a.HeldAs != b.HeldAs || a.AckedAs != a.HeldAs || !samePointer(a.Held, b.Acked) {
		t.Fatal("delta streams holding and having ACKed the same set do not share it")
	}
	if a.Sub != b.Sub || !samePointer(a.Names, b.Names) {
		t.Fatal("one subscription, two copies")
	}
	if steps[0] != steps[1] || steps[1] != steps[2] {
		t.Fatal("each stream computed its own transition")
	}

	// Unsubscribing one name moves the stream to the shared state of its
	// new subscription without touching what the other streams share.
	a.Subscribe(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNamesUnsubscribe: []string{"c3"}}, v2.Set(xdstype.EndpointURL))
	if _, ok := a.Held["c3"]; ok {
		t.Fatal("an unsubscribed name is still held")
	}
	if a.HeldAs == nil || a.HeldAs == b.HeldAs || a.HeldAs.sub != a.Sub || len(a.HeldAs.held) != 3 {
		t.Fatal("after unsubscribing, the stream does not share the state of its new subscription")
	}
	if _, ok := b.Held["c3"]; !ok {
		t.Fatal("one stream's unsubscription changed another's shared state")
	}
}

// The check that a route's clusters have arrived is answered once for
// every stream whose client ACKed the same clusters and assignments.
func TestArrivalCheckShared(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	names := []string{"c0", "c1"}
	v1 := world(t, reg, 2, 9000, "c0")
	var streams []*bareStream
	for range 2 {
		s := newBareStream(reg, share)
		s.ack(t, v1, s.request(t, v1, xdstype.ClusterURL, "", ""))
		s.ack(t, v1, s.request(t, v1, xdstype.EndpointURL, "", "", names...), names...)
		s.ack(t, v1, s.request(t, v1, xdstype.RouteURL, "", "", "main"), "main")
		streams = append(streams, s)
	}
	clusters := streams[0].at(xdstype.ClusterURL).AckedAs
	if clusters == nil || clusters != streams[1].at(xdstype.ClusterURL).AckedAs {
		t.Fatal("the streams do not share the clusters they ACKed")
	}

	// The route moves to c1, which both clients have: it goes out at once,
	// and the check was made once.
	v2 := world(t, reg, 2, 9000, "c1")
	before := len(clusters.ready)
	for _, s := range streams {
		resp, _ := s.push(v2, xdstype.RouteURL)
		if resp == nil || len(resp.Resources) != 1 {
			t.Fatal("the route to a cluster the client has was not sent")
		}
	}
	if n := len(clusters.ready) - before; n != 1 {
		t.Fatalf("%d arrival checks memoized for the new route, want 1 for both streams", n)
	}
	key := arrivalKey{r: v2.Set(xdstype.RouteURL).Get("main"), deps: [4]*Canon{streams[0].at(xdstype.EndpointURL).AckedAs}}
	if ok, known := clusters.ready[key]; !ok || !known {
		t.Fatalf("memo for the new route: %v (known %v), want true", ok, known)
	}

	// A route to a cluster the clients do not have yet is not released by
	// the memo: the full check holds it.
	v3 := world(t, reg, 3, 9000, "c2")
	for _, s := range streams {
		if resp, _ := s.push(v3, xdstype.RouteURL); resp != nil {
			t.Fatal("a route to a cluster the client lacks went out")
		}
	}
	if ok, known := clusters.ready[arrivalKey{r: v3.Set(xdstype.RouteURL).Get("main"), deps: [4]*Canon{streams[0].at(xdstype.EndpointURL).AckedAs}}]; !known || ok {
		t.Fatalf("memo for a route to a missing cluster: %v (known %v), want false", ok, known)
	}
}

func TestSubscriptionsInterned(t *testing.T) {
	c := newSubscriptions()
	a := c.get(false, []string{"x", "y", "z"})
	if b := c.get(false, []string{"z", "x", "y"}); b != a {
		t.Fatal("the same names in another order are another subscription")
	}
	if b := c.get(false, []string{"y", "x", "z", "x"}); b != a {
		t.Fatal("a repeated name makes another subscription")
	}
	if b := c.get(false, []string{"x", "*", "y", "z"}); b != a {
		t.Fatal(`"*" among the names counts as a name`)
	}
	if b := c.get(true, []string{"x", "y", "z"}); b == a || !b.Wildcard {
		t.Fatal("the wildcard is not part of the subscription's identity")
	}
	if b := c.get(false, []string{"x", "y"}); b == a || len(b.names) != 2 {
		t.Fatal("fewer names, same subscription")
	}
	if b := c.get(false, []string{"x", "y", "w"}); b == a {
		t.Fatal("other names, same subscription")
	}
	if n := collectedDownTo(c.size, 1); n != 1 {
		t.Fatalf("%d subscriptions kept, want 1 (the one still used)", n)
	}
	runtime.KeepAlive(a)
}

// A wildcard delta stream whose group loses a resource moves by the
// group's shared transition, which removes it: the client names nothing,
// so nothing needs the full plan's record of a name told it does not
// exist. Every stream making the move gets the same plan, the same list
// of resources, and the same removal. A stream that also names the lost
// resource does need that record, and declines.
func TestDeltaWildcardLosingAResourceStaysShared(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	typ := reg.Lookup(xdstype.ClusterURL)
	v1 := world(t, reg, 4, 9000, "c0")
	v2 := world(t, reg, 3, 9000, "c0") // c3 is gone
	watch := func(subscribe ...string) (*PlanConfig, *DeltaWatch) {
		st := testPlanConfig(reg, share)
		nw := NewDeltaWatch(typ, share)
		w := &nw
		w.Subscribe(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ.URL, ResourceNamesSubscribe: subscribe}, v1.Set(typ.URL))
		if d := deltaRound(t, st, w, v1, "1"); len(d.Resources) != 4 {
			t.Fatalf("first response: %d clusters, want 4", len(d.Resources))
		}
		return st, w
	}
	var plans []DeltaPlan
	for range 3 {
		st, w := watch("*")
		d := deltaRound(t, st, w, v2, "2")
		if d.Step == nil {
			t.Fatal("a wildcard stream losing c3 declined the shared plan")
		}
		if len(d.Resources) != 0 || !slices.Equal(d.Removed, []string{"c3"}) {
			t.Fatalf("sent %d clusters and removed %v, want none sent and c3 removed", len(d.Resources), d.Removed)
		}
		if w.HeldAs != d.Step.to || w.AckedAs != d.Step.to {
			t.Fatal("after the shared move the stream does not hold the shared state it moved to")
		}
		plans = append(plans, d)
	}
	for i, d := range plans[1:] {
		if d.Step != plans[0].Step || unsafe.SliceData(d.Removed) != unsafe.SliceData(plans[0].Removed) {
			t.Fatalf("stream %d computed its own move", i+1)
		}
	}

	st, w := watch("*", "c3")
	if d := deltaRound(t, st, w, v2, "2"); d.Step != nil {
		t.Fatal("a stream naming the lost cluster took the shared plan: nothing records that c3 does not exist")
	}
}
