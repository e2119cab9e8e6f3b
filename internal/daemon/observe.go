package daemon

import (
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Observability is what a Pylon server reports its streams to: the status
// tracker, the metrics, and the xDS observer feeding both. The fleet
// benchmark builds the same, to measure Pylon as it runs.
type Observability struct {
	Tracker *status.Tracker
	Metrics *metrics.Metrics
	// Observer feeds the tracker and the metrics; the daemon gives the
	// xDS server this composed with the rollout controller
	// (status.ComposeObservers).
	Observer status.Observer
}

// NewObservability returns the tracker and metrics for a server serving
// pub's fleets.
func NewObservability(reg *xdstype.Registry, pub *fleet.Publisher) *Observability {
	var met *metrics.Metrics
	tracker := status.NewTracker(status.Options{
		Expected: func(group, typeURL string) string {
			if f := pub.Current(); f != nil {
				for _, g := range f.Groups() {
					if g.Name == group {
						return g.Snapshot.Set(typeURL).Version()
					}
				}
			}
			return ""
		},
		Abbrev: func(url string) string {
			if t := reg.Lookup(url); t != nil {
				return t.Abbrev
			}
			return url
		},
		OnLatency: func(name string, d time.Duration) { met.Latency(name, d) },
	})
	met = metrics.New(tracker)
	// First of the publisher's callbacks: before the xDS streams'.
	rel := &releases{release: tracker.Released}
	pub.Notify(func() { rel.observe(pub.Current(), time.Now()) })
	met.CertificateExpiry(metrics.CertSecret, secretExpiry(pub))
	return &Observability{Tracker: tracker, Metrics: met, Observer: &tracking{reg: reg, t: tracker, m: met}}
}

// Published tells the tracker about a published fleet, for push latency.
func (o *Observability) Published(f *fleet.Fleet) { published(o.Tracker, f) }

// tracking feeds xDS stream events to the status tracker and the metrics.
// What a stream sends and its client ACKs on every change, the stream
// keeps itself (status.Event.Status): the tracker reads it there when
// asked, push latency included, and the tracking wants none of those
// events (Wants).
type tracking struct {
	reg *xdstype.Registry
	t   *status.Tracker
	m   *metrics.Metrics
}

func (o *tracking) abbrev(url string) string {
	if t := o.reg.Lookup(url); t != nil {
		return t.Abbrev
	}
	return url
}

// kinds name a stream for people (status) and for metrics labels.
func kinds(e *status.Event) (human, label string) {
	human, label = "ADS", "ads"
	if !e.ADS {
		human, label = "per-type", "per_type"
	}
	if e.Delta {
		human, label = human+" delta", label+"_delta"
	}
	return human, label
}

// Wants says which of the per-change events the tracking wants now
// (status.Selective): none. The streams' status it reads when asked
// (Event.Status), their counts at a scrape (status.Tracker.Totals), and
// push latency from what they ACKed when it is read
// (status.Tracker.Harvest).
func (o *tracking) Wants(status.EventKind) bool { return false }

// Observe records e. Each kind of event is handled apart (observeStream,
// observeType): this runs on the xDS stream's goroutine, whose stack must
// stay within 8 KB (see internal/xds serveStream), and one function of
// every case took a frame of almost a kilobyte.
func (o *tracking) Observe(e *status.Event) {
	switch e.Kind {
	case status.StreamOpened, status.StreamClosed, status.NoMatchingGroup, status.StreamRefused:
		o.observeStream(e)
	case status.RequestIgnored:
		o.m.Ignored(e.Reason)
	case status.ConnectionClosed:
		// No node, no stream: a count, and the xds server's log line.
		o.m.ConnectionClosed(e.Reason)
	case status.TransportRefused:
		o.m.Refused(e.Reason)
	default:
		o.observeType(e)
	}
}

// info is e as the tracker's status.Who: what it keeps of e's stream,
// read only when the tracker first meets the stream.
func (o *tracking) info(e *status.Event) status.Who { return (*eventWho)(e) }

// eventWho is an event seen as the stream's proxy. A pointer: passing it
// as an interface copies nothing.
type eventWho status.Event

func (w *eventWho) Info() status.Info {
	e := (*status.Event)(w)
	human, _ := kinds(e)
	info := status.Info{Peer: e.Peer, Kind: human, Identity: e.Identity}
	if n := e.Node; n != nil {
		info.Node, info.Cluster, info.Agent, info.AgentVersion = n.GetId(), n.GetCluster(), n.GetUserAgentName(), n.GetUserAgentVersion()
	}
	return info
}

// observeStream records a stream's opening, end or refusal.
func (o *tracking) observeStream(e *status.Event) {
	_, label := kinds(e)
	switch e.Kind {
	case status.StreamOpened:
		o.m.StreamOpened(label)
		o.t.Seen(e.StreamID, o.info(e), e.Group, e.At)
		if e.Status != nil {
			o.t.Attach(e.StreamID, o.info(e), e.Status, e.At)
		}
	case status.StreamClosed:
		o.m.StreamClosed(label)
		if e.Poll {
			// A REST poll answered: the proxy has not left.
			o.t.Forget(e.StreamID)
			return
		}
		o.t.Closed(e.StreamID, e.At)
	case status.NoMatchingGroup:
		o.t.Seen(e.StreamID, o.info(e), "", e.At)
	case status.StreamRefused:
		o.m.Refused(e.Reason)
		if (e.Reason == xds.RefusedDraining || e.Reason == xds.RefusedNoRequest) && e.NodeID() == "" {
			// A draining replica turns reconnects away before they say
			// who they are, and a stream that never sent a request never
			// said: nothing to show per proxy, only the count (listed,
			// a flood of silent streams would push real proxies' ended
			// streams out of the tracker's list).
			return
		}
		o.t.Refused(e.StreamID, o.info(e), e.Reason, e.Detail, e.At)
	}
}

// observeType records what happened to one type of a stream: a function a
// kind, for the frames' sake (see Observe).
func (o *tracking) observeType(e *status.Event) {
	switch e.Kind {
	case status.Subscribed:
		o.t.Requested(e.StreamID, o.info(e), e.TypeURL, e.At)
	case status.SubscriptionChanged:
		o.t.Subscribed(e.StreamID, o.info(e), e.TypeURL, e.Wildcard, e.Names, e.At)
	case status.ResponseSpared:
		// Nothing was sent: the stream stands as sent and ACKed at the
		// version the client reconnected with (X24), in its own status.
		o.m.Spared(o.abbrev(e.TypeURL), e.Bytes)
	case status.RequestNACK:
		o.nacked(e)
	case status.TypeSynced:
		// The tracker keeps nothing of a first sync: it is a metric.
		if e.FirstSync > 0 {
			o.m.FirstSync(o.abbrev(e.TypeURL), e.FirstSync)
		}
	}
}

func (o *tracking) nacked(e *status.Event) {
	o.m.NACK(o.abbrev(e.TypeURL))
	o.t.NACKed(e.StreamID, o.info(e), e.TypeURL, status.NACK{Version: e.Version, Nonce: e.Nonce, Detail: e.Detail, At: e.At})
}

// published tells the tracker which type versions a published fleet
// introduced and when the change was accepted, for push latency.
func published(t *status.Tracker, f *fleet.Fleet) {
	versions := map[string][]string{}
	for _, g := range f.Groups() {
		for _, set := range g.Snapshot.Sets() {
			versions[set.Type().URL] = append(versions[set.Type().URL], set.Version())
		}
	}
	at := f.AcceptedAt
	if at.IsZero() {
		at = time.Now()
	}
	t.Published(versions, at)
}

// openStreams counts the streams open now.
func openStreams(t *status.Tracker) int {
	n := 0
	for _, s := range t.Streams() {
		if s.Gone == nil {
			n++
		}
	}
	return n
}
