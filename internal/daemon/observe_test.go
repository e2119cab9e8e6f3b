package daemon

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// X24_spared_resend_is_synced: a SotW client reconnecting with the version
// it holds is spared the resend; status (read from the stream) shows the
// type SYNCED at that version with nothing sent, and the spared counters
// move by one response and its bytes, under the type's short name, while
// the sent counters stay.
func TestX24_spared_resend_is_synced(t *testing.T) {
	reg := xdstype.New()
	pub := fleet.NewPublisher()
	snap := xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Endpoints("a", 1), xdstest.Cluster("b"), xdstest.Endpoints("b", 2))
	pub.Publish(fleet.NewFleet(snap, time.Now()))
	version := snap.Set(xdstype.ClusterURL).Version()
	obs := NewObservability(reg, pub)
	// Through a real server: the stream keeps its status, the tracker
	// reads it there; the spared event says the bytes spared.
	var spared []int
	var mu sync.Mutex
	srv := xdstest.Start(t, xds.Options{Registry: reg, Fleets: pub, Observer: status.ComposeObservers(obs.Observer, observerFunc(func(e *status.Event) {
		if e.Kind == status.ResponseSpared {
			mu.Lock()
			spared = append(spared, e.Bytes)
			mu.Unlock()
		}
	}))})
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("spared"))
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.ClusterURL, VersionInfo: version})
	if !waitUntil(10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(spared) == 1 }) {
		t.Fatal("no spared resend reported")
	}
	s.ExpectSilence()

	// CDS, and the scripted client's probe (RTDS), sent when it opens.
	streams := obs.Tracker.Streams()
	if len(streams) != 1 || len(streams[0].Types) != 2 {
		t.Fatalf("streams: %+v", streams)
	}
	ty := streams[0].Types[0]
	if ty.State != status.Synced || ty.Sent == nil || ty.Sent.Version != version || ty.ACKed == nil || ty.ACKed.Version != version || ty.Sent.Nonce != "" {
		t.Fatalf("CDS after a spared resend: state %s, sent %+v, acked %+v; want SYNCED at %s, no nonce", ty.State, ty.Sent, ty.ACKed, version)
	}
	if ty.Sent.Resources != 2 {
		t.Errorf("resources held: %d, want 2", ty.Sent.Resources)
	}
	if spared[0] <= 0 {
		t.Errorf("%d bytes spared, want the size of the Clusters response", spared[0])
	}
	want := map[string]float64{
		"pylon_xds_resends_spared_total":      1,
		"pylon_xds_resend_bytes_spared_total": float64(spared[0]),
		"pylon_xds_responses_total":           0,
		"pylon_xds_response_bytes_total":      0,
		"pylon_xds_acks_total":                0,
	}
	for name, v := range want {
		if got := counter(t, obs.Metrics.Registry, name, "CDS"); got != v {
			t.Errorf("%s{type=CDS} = %v, want %v", name, got, v)
		}
	}
}

// counter is the value of the counter name{type=typ} (0 if absent).
func counter(t *testing.T, reg *prometheus.Registry, name, typ string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "type") == typ {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// X24_reconnect_spared_in_daemon: through the whole daemon, a SotW proxy
// that reconnects with the Cluster version it holds is sent no Clusters;
// /metrics counts the spared response and its bytes (and no second
// response sent), and /proxies shows the new stream SYNCED on CDS.
func TestX24_reconnect_spared_in_daemon(t *testing.T) {
	r := startDaemon(t, Options{})
	p := connect(t, r.xdsAddr, "x24")
	held := p.st.Version[xdstype.ClusterURL]
	sent := r.metric(t, `pylon_xds_responses_total{type="CDS"}`)
	if held == "" || sent != 1 {
		t.Fatalf("before the reconnect: CDS version %q, %v responses sent", held, sent)
	}
	p.st.Close()
	if !waitUntil(10*time.Second, func() bool {
		return slices.ContainsFunc(r.proxies(t), func(s proxyStream) bool { return s.Node == "x24" && s.Gone != nil })
	}) {
		t.Fatal("the server did not see the first stream end")
	}
	again := xdstest.OpenADS(t, p.conn, xdstest.Node("x24"))
	again.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.ClusterURL, VersionInfo: held})
	if !waitUntil(10*time.Second, func() bool { return r.metric(t, `pylon_xds_resends_spared_total{type="CDS"}`) == 1 }) {
		t.Fatalf("no spared CDS resend counted:\n%s", r.metrics(t))
	}
	if b := r.metric(t, `pylon_xds_resend_bytes_spared_total{type="CDS"}`); b <= 0 {
		t.Errorf("spared bytes %v, want the size of the Clusters response", b)
	}
	if n := r.metric(t, `pylon_xds_responses_total{type="CDS"}`); n != 1 {
		t.Errorf("%v CDS responses sent in all, want only the first stream's", n)
	}
	if !waitUntil(5*time.Second, func() bool {
		return slices.ContainsFunc(r.proxies(t), func(s proxyStream) bool { return s.Node == "x24" && s.Gone == nil && cdsSynced(s) })
	}) {
		t.Fatalf("the new stream is not SYNCED on CDS: %+v", r.proxies(t))
	}
}

// A draining replica turns reconnecting streams away before they name
// their node: the refusal is counted, but no nameless proxy is listed.
// A refusal of a named node is still listed, with its reason.
func TestDrainingRefusalNotListed(t *testing.T) {
	reg := xdstype.New()
	obs := NewObservability(reg, fleet.NewPublisher())
	at := time.Now()
	obs.Observer.Observe(&status.Event{Kind: status.StreamRefused, StreamID: 1, Reason: xds.RefusedDraining, Detail: "replica draining", At: at})
	obs.Observer.Observe(&status.Event{Kind: status.StreamRefused, StreamID: 2, Node: xdstest.Node("named"), Reason: xds.RefusedDraining, Detail: "replica draining", At: at})
	streams := obs.Tracker.Streams()
	if len(streams) != 1 || streams[0].Node != "named" || streams[0].Refused == nil || streams[0].Refused.Reason != xds.RefusedDraining {
		t.Fatalf("streams listed: %+v; want only the named node, refused for draining", streams)
	}
	families, err := obs.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "pylon_xds_streams_refused_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "reason") == xds.RefusedDraining && m.GetCounter().GetValue() == 2 {
				return
			}
		}
	}
	t.Fatal("pylon_xds_streams_refused_total{reason=draining} is not 2")
}

// A client subscribed by name to part of a set (every gRPC type, Envoy's
// EDS) holds a version of its own (X24); its ACK of a change still measures
// the change's push latency, and it counts in the change's rollout, since
// the events carry the set version the response was planned from.
func TestNamedSubscriptionPushLatencyAndRollout(t *testing.T) {
	reg := xdstype.New()
	pub := fleet.NewPublisher()
	obs := NewObservability(reg, pub)
	srv := xdstest.Start(t, xds.Options{Registry: reg, Fleets: pub, Observer: obs.Observer})
	publish := func(port uint32) {
		f := fleet.NewFleet(xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Endpoints("a", port), xdstest.Cluster("b"), xdstest.Endpoints("b", 2)), time.Now())
		obs.Published(f)
		pub.Publish(f)
	}
	publish(1)
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("grpc"))
	s.Request(xdstype.EndpointURL, "a")
	s.ACK(s.RecvType(xdstype.EndpointURL), "a")
	publish(11) // a change to the assignment the client holds
	r := s.RecvType(xdstype.EndpointURL)
	s.ACK(r, "a")
	if !waitUntil(10*time.Second, func() bool {
		ro := obs.Tracker.Propagation()
		return len(ro.Groups) == 1 && ro.Groups[0].Done == 1 && ro.Groups[0].Total == 1
	}) {
		t.Fatalf("the ACK of the change is not in its rollout: %+v", obs.Tracker.Propagation())
	}
	// Push latency is harvested from the stream's own status at the
	// scrape, which the rollout read too: no wait.
	for range 2 { // a second scrape measures nothing again
		if n := histogramCount(t, obs.Metrics.Registry, "pylon_push_latency_seconds"); n != 1 {
			t.Fatalf("push latency observed %d times, want once (the change's ACK)", n)
		}
	}
}

// histogramCount is the sample count of every series of histogram name.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// Connections the server ends and streams gRPC refuses at the per-connection
// bound have no node: they are counted by reason, never listed as proxies.
func TestConnectionEventsCounted(t *testing.T) {
	obs := NewObservability(xdstype.New(), fleet.NewPublisher())
	at := time.Now()
	obs.Observer.Observe(&status.Event{Kind: status.ConnectionClosed, Reason: "evicted", At: at})
	obs.Observer.Observe(&status.Event{Kind: status.ConnectionClosed, Reason: "evicted", At: at})
	obs.Observer.Observe(&status.Event{Kind: status.TransportRefused, Reason: guard.TransportRefusedStreams, At: at})
	if streams := obs.Tracker.Streams(); len(streams) != 0 {
		t.Fatalf("connection events listed as proxies: %+v", streams)
	}
	for series, want := range map[[2]string]float64{
		{"pylon_xds_connections_closed_total", "evicted"}:                  2,
		{"pylon_xds_streams_refused_total", guard.TransportRefusedStreams}: 1,
	} {
		if got := labelled(t, obs.Metrics.Registry, series[0], "reason", series[1]); got != want {
			t.Errorf("%s{reason=%s} = %v, want %v", series[0], series[1], got, want)
		}
	}
}

// labelled is the value of counter name{label=value} (0 if absent).
func labelled(t *testing.T, reg *prometheus.Registry, name, lbl, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				if label(m, lbl) == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A stream's subscription reaches its status: what drift compares a
// state-of-the-world set with (a named gRPC client does not miss the
// clusters it never asked for).
func TestSubscriptionReachesStatus(t *testing.T) {
	reg := xdstype.New()
	obs := NewObservability(reg, fleet.NewPublisher())
	ev := status.Event{StreamID: 9, Node: xdstest.Node("grpc"), Group: fleet.DefaultGroup, ADS: true, TypeURL: xdstype.ClusterURL, At: time.Now()}
	for _, k := range []status.EventKind{status.StreamOpened, status.Subscribed} {
		ev.Kind = k
		obs.Observer.Observe(&ev)
	}
	ev.Kind, ev.Names = status.SubscriptionChanged, []string{"a", "b"}
	obs.Observer.Observe(&ev)
	streams := obs.Tracker.Streams()
	if len(streams) != 1 || len(streams[0].Types) != 1 {
		t.Fatalf("streams: %+v", streams)
	}
	sub := streams[0].Types[0].Subscription
	if sub == nil || sub.Wildcard || !slices.Equal(sub.Names, []string{"a", "b"}) {
		t.Fatalf("subscription in status: %+v, want names a, b", sub)
	}
}

// The tracking wants none of the per-change events: the streams keep
// their status, read when asked, push latency included (harvested).
// Composed with another observer, it wants what that one wants: all of
// them from one that does not say.
func TestTrackingWants(t *testing.T) {
	obs := NewObservability(xdstype.New(), fleet.NewPublisher())
	sel, ok := obs.Observer.(status.Selective)
	if !ok {
		t.Fatal("the tracking is not a status.Selective: the server would report every per-change event to it")
	}
	for k, want := range map[status.EventKind]bool{status.VersionTaken: false, status.ExpectedVersion: false, status.ResponseSent: false, status.RequestACK: false} {
		if got := sel.Wants(k); got != want {
			t.Errorf("Wants(%d) = %v, want %v", k, got, want)
		}
	}
	sel, ok = status.ComposeObservers(obs.Observer, everything{}).(status.Selective)
	if !ok || !sel.Wants(status.ResponseSent) || !sel.Wants(status.ExpectedVersion) {
		t.Error("an observer after the tracking that does not say what it wants does not get everything")
	}
}

type everything struct{}

// observerFunc is a function as a status.Observer.
type observerFunc func(*status.Event)

func (f observerFunc) Observe(e *status.Event) { f(e) }

func (everything) Observe(*status.Event) {}

// A scrape reads every stream's status from the stream (Tracker.Counts,
// Totals), and allocates the same for 2 streams as for 12: a status read
// through an interface into a value of the reader's escaped, one
// allocation per type of every stream per scrape.
func TestScrapeOfLiveStreamsAllocatesPerScrape(t *testing.T) {
	reg := xdstype.New()
	pub := fleet.NewPublisher()
	pub.Publish(fleet.NewFleet(xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Endpoints("a", 1)), time.Now()))
	obs := NewObservability(reg, pub)
	srv := xdstest.Start(t, xds.Options{Registry: reg, Fleets: pub, Observer: obs.Observer})
	conn := xdstest.Dial(t, srv.Addr)
	open := func(n int) {
		for i := range n {
			s := xdstest.OpenADS(t, conn, xdstest.Node(fmt.Sprint("p", i)))
			s.Request(xdstype.ClusterURL)
			s.ACK(s.RecvType(xdstype.ClusterURL))
		}
		if !waitUntil(10*time.Second, func() bool { return obs.Tracker.States()[status.Synced] >= n }) {
			t.Fatalf("%d streams not SYNCED: %v", n, obs.Tracker.States())
		}
	}
	scrape := func() float64 {
		return testing.AllocsPerRun(10, func() { obs.Tracker.Counts(); obs.Tracker.Totals() })
	}
	open(2)
	few := scrape()
	open(12)
	if many := scrape(); many != few {
		t.Fatalf("a scrape allocates %v times at 2 streams, %v at 14", few, many)
	}
}

// A stream that never sent a request has no node to list: its refusal is
// counted, not kept among the ended streams a flood of them would push
// out.
func TestSilentStreamRefusalNotListed(t *testing.T) {
	obs := NewObservability(xdstype.New(), fleet.NewPublisher())
	obs.Observer.Observe(&status.Event{Kind: status.StreamRefused, StreamID: 1, Reason: xds.RefusedNoRequest, Detail: "no request", At: time.Now()})
	if streams := obs.Tracker.Streams(); len(streams) != 0 {
		t.Fatalf("streams listed: %+v; want none for a stream that never said who it is", streams)
	}
}
