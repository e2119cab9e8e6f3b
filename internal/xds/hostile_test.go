package xds_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// openNonReaders opens n ADS streams over conns connections with small
// flow-control windows, each asking for every cluster and listener and
// then never reading: the server's sends to them block once the stream's
// window is full.
func openNonReaders(t *testing.T, addr string, conns, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var cc []*grpc.ClientConn
	for range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cc = append(cc, c)
	}
	for i := range n {
		cs, err := cc[i%conns].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, xdstest.ADSMethod)
		if err != nil {
			t.Fatal(err)
		}
		for _, url := range []string{cds, lds} {
			req := &discoveryv3.DiscoveryRequest{TypeUrl: url}
			if url == cds {
				req.Node = xdstest.Node(fmt.Sprintf("hostile-%03d", i))
			}
			if err := cs.SendMsg(req); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A well-behaved proxy gets its full config while 100 streams refuse to
// read a config large enough to fill their flow-control windows: a stalled
// send gives its initial-send slot back after SendStall, and the stalled
// streams are evicted (their connections closed) after three times that.
// Before sends were bounded, the 100 held every slot and the proxy was
// turned away with RESOURCE_EXHAUSTED after AdmissionWait.
func TestNonReadingStreamsDoNotStarveOthers(t *testing.T) {
	rec := newRecorder()
	logs := &jsonLogs{buf: &lockedBuffer{}}
	srv := xdstest.Start(t, xds.Options{
		Observer: rec, MaxInitialSends: 4, SendStall: 100 * time.Millisecond, AdmissionWait: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(logs.buf, nil)),
	})
	world := bigClusters(0, 1000*1000) // 1,000 clusters of 1 kB
	world = append(world, xdstest.APIListener("ingress", "routes"), xdstest.Route("routes", "c0000"))
	srv.Publish(t, world...)

	const hostile = 100
	openNonReaders(t, srv.Addr, 10, hostile)
	// Let them take every slot before the proxy comes.
	waitFor(t, "the non-readers to fill every initial-send slot", func() bool { return srv.XDS.InitialSendsPeak() >= 4 })

	p := xdstest.NewProxy(t, xdstest.Dial(t, srv.Addr), "good", false)
	p.Settle()
	if len(p.Clusters) != 1000 || len(p.Listeners) != 1 || len(p.Routes) != 1 {
		t.Fatalf("the proxy got %d clusters, %d listeners, %d routes; want 1000, 1, 1", len(p.Clusters), len(p.Listeners), len(p.Routes))
	}
	noViolations(t, p)

	// Every non-reader's stream ends: those stalled in a send are evicted
	// (refused for stalling), which closes their connection, and so ends
	// the others on it.
	stalled := func(e status.Event) bool {
		return e.Kind == status.StreamRefused && e.Reason == xds.RefusedStalled && strings.HasPrefix(e.NodeID(), "hostile-")
	}
	closed := func(e status.Event) bool {
		return e.Kind == status.StreamClosed && strings.HasPrefix(e.NodeID(), "hostile-")
	}
	waitFor(t, "every non-reader's stream to end", func() bool { return rec.count(closed) == hostile })
	if n := rec.count(stalled); n == 0 {
		t.Fatal("no stream was refused for stalling")
	}
	if n := rec.count(func(e status.Event) bool { return e.Kind == status.StreamRefused && e.NodeID() == "good" }); n != 0 {
		t.Fatalf("the good proxy's stream was refused %d times", n)
	}
	// Each says why it ended: evicted, whether it stalled itself or was on
	// a connection closed for another that did.
	reasons := map[any]int{}
	for _, l := range logs.lines(t, "proxy disconnected") {
		if strings.HasPrefix(l["node"].(string), "hostile-") {
			reasons[l["reason"]]++
		}
	}
	if reasons["evicted"] != hostile {
		t.Fatalf("hostile streams ended for %v; want all %d evicted", reasons, hostile)
	}
	// Their StreamClosed events say the same, for the metrics.
	if n := rec.count(func(e status.Event) bool { return closed(e) && e.Reason == xds.ClosedEvicted }); n != hostile {
		t.Fatalf("%d hostile StreamClosed events with reason %s, want %d", n, xds.ClosedEvicted, hostile)
	}
	// And each of their 10 connections is reported closed as evicted, the
	// good proxy's not at all.
	conns := map[string]int{}
	waitFor(t, "the non-readers' 10 connections to be reported closed", func() bool {
		return rec.count(func(e status.Event) bool { return e.Kind == status.ConnectionClosed }) >= 10
	})
	for _, e := range rec.all() {
		if e.Kind == status.ConnectionClosed {
			conns[e.Reason]++
		}
	}
	if conns[guard.ConnEvicted] != 10 || len(conns) != 1 {
		t.Fatalf("connections reported closed: %v; want 10 %s", conns, guard.ConnEvicted)
	}
}

// The same with the server's defaults (64 initial-send slots, a send
// keeping its slot at most a second, AdmissionWait 10s): a hundred
// non-readers, more than there are slots, delay a new proxy by about two
// seconds, not past AdmissionWait.
func TestNonReadingStreamsDoNotStarveOthersWithDefaults(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{})
	world := bigClusters(0, 1000*1000)
	world = append(world, xdstest.APIListener("ingress", "routes"), xdstest.Route("routes", "c0000"))
	srv.Publish(t, world...)
	openNonReaders(t, srv.Addr, 10, 100)
	waitFor(t, "the non-readers to fill every initial-send slot", func() bool { return srv.XDS.InitialSendsPeak() >= 64 })
	start := time.Now()
	p := xdstest.NewProxy(t, xdstest.Dial(t, srv.Addr), "good", false)
	p.Settle()
	if len(p.Clusters) != 1000 || len(p.Listeners) != 1 || len(p.Routes) != 1 {
		t.Fatalf("the proxy got %d clusters, %d listeners, %d routes; want 1000, 1, 1", len(p.Clusters), len(p.Listeners), len(p.Routes))
	}
	noViolations(t, p)
	// About two seconds; anywhere near AdmissionWait means a newcomer
	// behind a few more non-readers would be turned away.
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the proxy was served after %v behind 100 non-readers", took.Round(time.Millisecond))
	}
}

// waitFor waits, within a bound, for cond, checking it every few
// milliseconds: for conditions no event announces.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * xdstest.Timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// A client sending requests for thousands of made-up type URLs is logged
// once and counted each time; the stream keeps working.
func TestUnknownTypesCountedNotLogged(t *testing.T) {
	var logs lockedBuffer
	rec := newRecorder()
	srv := xdstest.Start(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv.Publish(t, base()...)
	e := &env{srv: srv, conn: xdstest.Dial(t, srv.Addr), rec: rec}
	s := e.ads(t, "n1")
	s.Request(cds)
	s.RecvType(cds)
	const garbage = 500
	for i := range garbage {
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: fmt.Sprintf("type.googleapis.com/garbage.%d", i)})
	}
	s.ExpectSilence()
	ignored := func(ev status.Event) bool {
		return ev.Kind == status.RequestIgnored && ev.Reason == xds.IgnoredUnknownType
	}
	if n := e.rec.count(ignored); n != garbage {
		t.Fatalf("%d ignored requests reported, want %d", n, garbage)
	}
	if n := strings.Count(logs.String(), "ignoring requests for a type"); n != 1 {
		t.Fatalf("%d log lines for %d garbage requests, want 1:\n%s", n, garbage, bounded(logs.String()))
	}
}

// lockedBuffer is a log destination safe for the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// bounded keeps a failure message readable.
func bounded(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// globs returns n distinct xdstp:// glob collections of clusters.
func globs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("xdstp://pylon.example/envoy.config.cluster.v3.Cluster/g%d/*", i)
	}
	return out
}

// A request naming more resources than MaxResourceNames ends the stream
// with RESOURCE_EXHAUSTED naming the field; so does a delta subscription
// growing past it, a name longer than any resource's, and more glob
// collections than a client needs.
func TestMaxResourceNames(t *testing.T) {
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("c%d", i)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		drive func(t *testing.T, e *env) error
		want  string
	}{
		{name: "sotw", want: "names 101 resources in resource_names; Pylon accepts at most 100", drive: func(t *testing.T, e *env) error {
			s := e.ads(t, "n1")
			s.Request(eds, many(101)...)
			return s.Err()
		}},
		{name: "sotw at the bound", want: "", drive: func(t *testing.T, e *env) error {
			s := e.ads(t, "n1")
			s.Request(cds, many(100)...)
			s.RecvType(cds)
			return nil
		}},
		{name: "delta subscribe", want: "names 101 resources in resource_names_subscribe", drive: func(t *testing.T, e *env) error {
			s := e.delta(t, "n1")
			s.Subscribe(eds, many(101)...)
			return s.Err()
		}},
		{name: "delta initial versions", want: "names 101 resources in initial_resource_versions", drive: func(t *testing.T, e *env) error {
			s := e.delta(t, "n1")
			iv := map[string]string{}
			for _, n := range many(101) {
				iv[n] = "v"
			}
			s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: eds, InitialResourceVersions: iv})
			return s.Err()
		}},
		{name: "sotw long name", want: "names a resource of 4097 bytes in resource_names; Pylon accepts names of at most 4096 bytes", drive: func(t *testing.T, e *env) error {
			s := e.ads(t, "n1")
			s.Request(cds, "a", strings.Repeat("x", 4097))
			return s.Err()
		}},
		{name: "sotw name at the bound", want: "", drive: func(t *testing.T, e *env) error {
			s := e.ads(t, "n1")
			s.Request(cds, "a", strings.Repeat("x", 4096))
			s.RecvType(cds)
			return nil
		}},
		{name: "delta long alias", want: "names a resource of 4097 bytes in resource_names_subscribe", drive: func(t *testing.T, e *env) error {
			s := e.delta(t, "n1")
			s.Subscribe(vhds, "rc/"+strings.Repeat("h", 4094))
			return s.Err()
		}},
		{name: "delta long initial version", want: "names a resource of 4097 bytes in initial_resource_versions", drive: func(t *testing.T, e *env) error {
			s := e.delta(t, "n1")
			s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: eds, InitialResourceVersions: map[string]string{strings.Repeat("x", 4097): "v"}})
			return s.Err()
		}},
		{name: "sotw too many globs", want: "holds 65 xdstp:// glob collections; Pylon accepts at most 64", drive: func(t *testing.T, e *env) error {
			s := e.ads(t, "n1")
			s.Request(cds, globs(65)...)
			return s.Err()
		}},
		{name: "delta globs add up", want: "holds 65 xdstp:// glob collections", drive: func(t *testing.T, e *env) error {
			s := e.delta(t, "n1")
			s.Subscribe(cds, globs(64)...)
			s.RecvType(cds)
			s.Subscribe(cds, "xdstp://pylon.example/envoy.config.cluster.v3.Cluster/extra/*")
			return s.Err()
		}},
		{name: "delta subscription adds up", want: "names 102 resources in the stream's subscription", drive: func(t *testing.T, e *env) error {
			s := e.delta(t, "n1")
			s.Subscribe(eds, many(60)...)
			s.RecvType(eds)
			s.Subscribe(eds, many(102)[60:]...)
			return s.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			srv := xdstest.Start(t, xds.Options{Observer: rec, MaxResourceNames: 100})
			srv.Publish(t, base()...)
			e := &env{srv: srv, conn: xdstest.Dial(t, srv.Addr), rec: rec}
			err := tc.drive(t, e)
			if tc.want == "" {
				return
			}
			if grpcstatus.Code(err) != codes.ResourceExhausted || !strings.Contains(grpcstatus.Convert(err).Message(), tc.want) {
				t.Fatalf("stream ended with %v, want RESOURCE_EXHAUSTED containing %q", err, tc.want)
			}
			rec.wait(t, func(ev status.Event) bool {
				return ev.Kind == status.StreamRefused && ev.Reason == xds.RefusedResourceNames
			})
		})
	}
}

// What a client writes is bounded where it is kept: a NACK's error_detail
// of a megabyte reaches the observer (and so status) cut to 4 KiB.
func TestNACKDetailBounded(t *testing.T) {
	e := setup(t, base()...)
	s := e.ads(t, "n1")
	s.Request(cds)
	r := s.RecvType(cds)
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: cds, ResponseNonce: r.Nonce, ErrorDetail: &rpcstatus.Status{Code: 3, Message: strings.Repeat("x", 1<<20)}})
	ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestNACK })
	if len(ev.Detail) > 4<<10+64 || !strings.HasSuffix(ev.Detail, "(1048576 bytes in all)") {
		t.Fatalf("NACK detail of %d bytes reported (ends %q)", len(ev.Detail), ev.Detail[max(0, len(ev.Detail)-40):])
	}
}

// A node id too long to log is refused, and says so.
func TestHugeNodeIDRefused(t *testing.T) {
	e := setup(t, base()...)
	s := xdstest.OpenADS(t, e.conn, xdstest.Node(strings.Repeat("n", 100000)))
	s.Request(cds)
	err := s.Err()
	if grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "node.id is 100000 bytes; Pylon accepts at most 1024") {
		t.Fatalf("stream ended with %v", err)
	}
	ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.StreamRefused })
	if ev.Reason != xds.RefusedBadNode {
		t.Fatalf("refused for %q", ev.Reason)
	}
}

// The node metadata's string fields, which a stream keeps for its life,
// are bounded in count and bytes; values of other kinds are not kept and
// not counted, so a node with much structured metadata is still served.
func TestNodeMetadataBounded(t *testing.T) {
	withStrings := func(n, size int) *structpb.Struct {
		m := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for i := range n {
			m.Fields[fmt.Sprintf("k%03d", i)] = structpb.NewStringValue(strings.Repeat("v", size))
		}
		return m
	}
	structured := withStrings(100, 100)
	for i := range 500 {
		m, _ := structpb.NewStruct(map[string]any{"labels": strings.Repeat("l", 100)})
		structured.Fields[fmt.Sprintf("s%03d", i)] = structpb.NewStructValue(m)
	}
	cases := []struct {
		name string
		md   *structpb.Struct
		want string // "" when served
	}{
		{"keys", withStrings(129, 1), "node.metadata has 129 string fields; Pylon accepts at most 128"},
		{"bytes", withStrings(8, 2048), "node.metadata's string fields are 16416 bytes (keys and values); Pylon accepts at most 16384"},
		{"structured", structured, ""},
		{"at the bounds", withStrings(128, 124), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, base()...)
			node := xdstest.Node("n1")
			node.Metadata = c.md
			s := xdstest.OpenADS(t, e.conn, node)
			s.Request(cds)
			if c.want == "" {
				s.RecvType(cds)
				return
			}
			if err := s.Err(); grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("stream ended with %v", err)
			}
			ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.StreamRefused })
			if ev.Reason != xds.RefusedBadNode {
				t.Fatalf("refused for %q", ev.Reason)
			}
		})
	}
}

// The per-connection stream bound is in the server's gRPC options: the
// 3rd concurrent stream on a connection waits until one ends.
func TestMaxStreamsPerConnection(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{MaxStreamsPerConnection: 2})
	srv.Publish(t, base()...)
	conn := xdstest.Dial(t, srv.Addr)
	a := xdstest.OpenADS(t, conn, xdstest.Node("a"))
	a.Request(cds)
	a.RecvType(cds)
	b := xdstest.OpenADS(t, conn, xdstest.Node("b"))
	b.Request(cds)
	b.RecvType(cds)
	// A third stream cannot even open while a and b are: grpc's client
	// waits for the server's stream quota. Once a ends, it opens.
	opened := make(chan *xdstest.Stream, 1)
	go func() { opened <- xdstest.OpenADS(t, conn, xdstest.Node("c")) }()
	select {
	case <-opened:
		t.Fatal("a third stream opened on the connection while two were open")
	case <-time.After(200 * time.Millisecond):
	}
	a.Close()
	select {
	case c := <-opened:
		c.Request(cds)
		c.RecvType(cds)
	case <-time.After(xdstest.Timeout):
		t.Fatal("the third stream did not open after the first ended")
	}
}

// What the status tracker keeps of a client's strings is bounded: a 3 MiB
// node id, cluster, locality field, user agent name or version is refused
// as bad_node,
// and the refused stream (kept after it is gone, and shown in /proxies)
// holds at most a KiB or so of each, not the strings as sent.
func TestHugeNodeStringsNotKept(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	cases := map[string]func(n *corev3.Node){
		"id":                 func(n *corev3.Node) { n.Id = huge },
		"cluster":            func(n *corev3.Node) { n.Cluster = huge },
		"user_agent_name":    func(n *corev3.Node) { n.UserAgentName = huge },
		"user_agent_version": func(n *corev3.Node) { n.UserAgentVersionType = &corev3.Node_UserAgentVersion{UserAgentVersion: huge} },
		"locality.region":    func(n *corev3.Node) { n.Locality = &corev3.Locality{Region: huge} },
		"locality.zone":      func(n *corev3.Node) { n.Locality = &corev3.Locality{Zone: huge} },
		"locality.sub_zone":  func(n *corev3.Node) { n.Locality = &corev3.Locality{SubZone: huge} },
	}
	for field, set := range cases {
		t.Run(field, func(t *testing.T) {
			var srv *xdstest.Server
			obs := newTracked(func() *xdstest.Server { return srv })
			srv = xdstest.Start(t, xds.Options{Observer: obs})
			srv.Publish(t, base()...)
			node := xdstest.Node("n1")
			set(node)
			s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), node)
			s.Request(cds)
			if err := s.Err(); grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "node."+field+" is 3145728 bytes") {
				t.Fatalf("stream ended with %v", bounded(fmt.Sprint(err)))
			}
			ev := obs.wait(t, func(ev status.Event) bool { return ev.Kind == status.StreamRefused })
			if ev.Reason != xds.RefusedBadNode {
				t.Fatalf("refused for %q", ev.Reason)
			}
			streams := obs.tracker.Streams()
			if len(streams) != 1 {
				t.Fatalf("tracker keeps %d streams, want the refused one", len(streams))
			}
			st := streams[0]
			for name, v := range map[string]string{"Node": st.Node, "Cluster": st.Cluster, "Client": st.Client} {
				if len(v) > 2<<10 {
					t.Errorf("the tracker keeps %d bytes of %s", len(v), name)
				}
			}
			// The locality is not among what a refused stream reports.
			if !strings.HasPrefix(field, "locality") && !strings.Contains(st.Node+st.Cluster+st.Client, "(3145728 bytes in all)") {
				t.Errorf("the kept node does not say how long the field was: %q %q %q", bounded(st.Node), bounded(st.Cluster), bounded(st.Client))
			}
		})
	}
}
