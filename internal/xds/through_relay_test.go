package xds_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/relay"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// throughRelay makes setup put a relay (pylon relay's engine, keyed by
// cluster) in front of the server each test publishes to: the test's
// client speaks to the relay, the relay to the origin. TestSuitesThroughARelay
// runs the conformance suites so.
var throughRelay = flag.Bool("through-relay", false, "run the suites against a relay in front of the server they publish to")

// relaySuites are the conformance suites run through a relay: every test
// built on setup (sotw_test.go's), which publishes to a server and speaks
// to it only through its address.
var relaySuites = []string{
	"TestSotW", "TestDelta", "TestDeltaAllMainTypes", "TestSotWReconnect", "TestX24Greeting",
	"TestTTL", "TestSubscriptionChangedReported", "TestResourceErrors_.*", "TestSotW_.*", "TestDelta_.*",
	"TestX46_.*", "TestGroups", "TestSetVersionOfNamedSubscription", "TestMakeBeforeBreak", "TestMakeBeforeBreakPerTypeStreams",
}

// notThroughRelay are the suites' tests whose rule a relay does not keep,
// by name (a regular expression of the test's full name), with why;
// setup skips them through a relay, saying so. docs/relay.md lists them.
var notThroughRelay = map[string]string{
	`TestGroups/.*`: "the origin's node groups by id or metadata: a relay keyed by cluster serves each cluster one " +
		"config; with --upstream-admin it keys by the upstream's groups (internal/relay's TestProxiesAreKeyedByTheUpstreamsGroups)",
}

// serve starts the server a suite's test speaks to: the origin alone, or,
// with -through-relay, a relay in front of it. The test publishes to
// e.srv (the origin) and dials e.conn; e.rec observes the streams the
// test's client opened, on whichever server holds them.
func serve(t *testing.T, opts xds.Options, msgs ...any) *env {
	t.Helper()
	return serveFrom(t, opts, true, msgs...)
}

// serveUnpublished is serve for a test that publishes the first config
// itself: the origin alone publishes nothing before; through a relay,
// the origin publishes an empty config, which the relay takes its key
// with.
func serveUnpublished(t *testing.T, opts xds.Options) *env {
	t.Helper()
	return serveFrom(t, opts, false)
}

func serveFrom(t *testing.T, opts xds.Options, publish bool, msgs ...any) *env {
	t.Helper()
	rec := newRecorder()
	if !*throughRelay {
		opts.Observer = rec
		srv := xdstest.Start(t, opts)
		if publish {
			srv.Publish(t, msgs...)
		}
		return &env{srv: srv, conn: xdstest.Dial(t, srv.Addr), rec: rec, served: srv.Publisher}
	}
	for pattern, why := range notThroughRelay {
		if regexp.MustCompile("^" + pattern + "$").MatchString(t.Name()) {
			t.Skip("not through a relay: " + why)
		}
	}
	waits := newPublishWaits()
	origin := xdstest.Start(t, xds.Options{Fleets: waits})
	origin.Publisher = waits.pub // what the test publishes, the origin serves
	origin.Publish(t, msgs...)
	front, relayed := startRelayOf(t, origin, opts, rec)
	waits.until(func() { caughtUp(origin, relayed) })
	return &env{srv: origin, conn: xdstest.Dial(t, front), rec: rec, served: relayed}
}

// publishWaits is the origin's fleets through a relay: each publish wakes
// the origin's streams, then waits, a few seconds at most, until the
// relay serves what the origin does. The suites publish and read at
// once, what the origin serves at that instant; through a relay, that is
// what the relay serves once its upstream stream brought the publish.
type publishWaits struct {
	pub  *fleet.Publisher
	mu   sync.Mutex
	fns  map[int]func()
	next int
	wait func()
}

func newPublishWaits() *publishWaits {
	p := &publishWaits{pub: fleet.NewPublisher(), fns: map[int]func(){}}
	p.pub.Notify(p.dispatch)
	return p
}

func (p *publishWaits) Current() *fleet.Fleet { return p.pub.Current() }

func (p *publishWaits) Notify(f func()) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.next
	p.next++
	p.fns[id] = f
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.fns, id)
	}
}

// until makes each publish from now wait for wait.
func (p *publishWaits) until(wait func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wait = wait
}

// dispatch wakes the origin's streams (the relay's among them), then
// waits: on the publishing goroutine, the test's.
func (p *publishWaits) dispatch() {
	p.mu.Lock()
	fns := make([]func(), 0, len(p.fns))
	for _, f := range p.fns {
		fns = append(fns, f)
	}
	wait := p.wait
	p.mu.Unlock()
	for _, f := range fns {
		f()
	}
	if wait != nil {
		wait()
	}
}

// startRelayOf runs a relay in front of upstreamAddr, as pylon relay's
// daemon wires one (relay.Admit and its observing the downstream
// streams), until the test ends; it returns the relay's xDS address.
// opts are the relay's xDS server's: the bounds a test sets hold there.
func startRelayOf(t *testing.T, origin *xdstest.Server, opts xds.Options, rec *recorder) (string, *fleet.Publisher) {
	t.Helper()
	tmpl, err := relay.ParseTemplate(relay.DefaultKey)
	if err != nil {
		t.Fatal(err)
	}
	reg, pub, pool := xdstype.New(), fleet.NewPublisher(), upstream.NewPool(nil, 0, 0)
	rl := relay.New(relay.Options{
		Upstreams: []string{origin.Addr}, Pool: pool, Template: tmpl, ID: "relay-suite",
		Registry: reg, Publisher: pub, DataDir: t.TempDir(),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := rl.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		pool.Close()
	})
	opts.Registry, opts.Fleets = reg, pub
	opts.Admit = func(ctx context.Context, n nodegroup.Node) (func(), xds.Subscribed, error) {
		if n.ID != warmUpNode {
			caughtUp(origin, pub)
		}
		return rl.Admit(ctx, n)
	}
	g := &gate{rec: rec}
	opts.Observer = status.ComposeObservers(g, rl)
	addr := xdstest.Start(t, opts).Addr
	warm(t, addr)
	g.open.Store(true)
	return addr, pub
}

// same reports whether the relay's fleet serves node what the origin's
// does, of every type a relay relays: versions are content hashes, the
// relay's as the origin's, so equal versions are the same resources. Of
// the types subscribed by name, the relay holds what its config names and
// its proxies asked for: each of those is the origin's, and a name none
// of them names or asked for yet is not compared.
func same(origin, front *fleet.Fleet, node *corev3.Node) bool {
	if origin == nil || front == nil {
		return false
	}
	want, got := origin.For(node), front.For(node)
	if want == nil || got == nil {
		return false
	}
	for _, set := range want.Sets() {
		switch url := set.Type().URL; {
		case url == xdstype.SecretURL, url == xdstype.VirtualHostURL:
		case set.Type().Wildcard || url == xdstype.RuntimeURL:
			if got.Set(url).Version() != set.Version() {
				return false
			}
		default:
			for _, name := range got.Set(url).Names() {
				if w := set.Get(name); w == nil || w.Version != got.Set(url).Get(name).Version {
					return false
				}
			}
		}
	}
	return true
}

// warmUpNode is the node of warm's stream.
const warmUpNode = "relay-suite-warm-up"

// caughtUp waits, a few seconds at most, until the relay serves what the
// origin does: the suites publish and open a stream at once, reading
// what the origin serves at that instant, and a relay gets a publish on
// its upstream stream a moment later. Versions are content hashes, the
// relay's as the origin's, so equal versions are the same config.
func caughtUp(origin *xdstest.Server, front *fleet.Publisher) {
	wake, stop := front.Subscribe()
	defer stop()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	node := xdstest.Node("caught-up")
	for {
		if same(origin.Publisher.Current(), front.Current(), node) {
			return
		}
		select {
		case <-wake:
		case <-deadline.C:
			return // the test's own waits say what is missing
		}
	}
}

// warm has the relay take the suites' key (their nodes' cluster) and its
// first config before the test speaks: a key's first proxy waits for it
// (docs/relay.md), which is the relay's own rule, tested in
// internal/relay; the suites test what every later proxy of a key sees.
func warm(t *testing.T, addr string) {
	t.Helper()
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, addr), xdstest.Node(warmUpNode))
	// The probe: in every config the suites publish, empty ones too.
	s.Subscribe(xdstype.RuntimeURL, xdstest.ProbeName)
	s.RecvType(xdstype.RuntimeURL)
	s.Close()
}

// gate passes the relay's stream events to rec once the warm-up is over:
// the test counts only its own client's.
type gate struct {
	rec  *recorder
	open atomic.Bool
}

func (g *gate) Observe(e *status.Event) {
	if g.open.Load() && e.NodeID() != warmUpNode {
		g.rec.Observe(e)
	}
}

// TestSuitesThroughARelay runs the conformance suites (relaySuites)
// against a relay in front of the server they publish to: the relay must
// keep every rule of the protocol a proxy sees, but those
// notThroughRelay names. It runs this test binary again with -through-relay.
func TestSuitesThroughARelay(t *testing.T) {
	if *throughRelay {
		t.Skip("already running through a relay")
	}
	if testing.Short() {
		t.Skip("runs the suites again: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := "^(" + strings.Join(relaySuites, "|") + ")$"
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", run, "-test.count", "1", "-test.v", "-test.timeout", "7m", "-through-relay")
	out, err := cmd.CombinedOutput()
	var failed []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "--- FAIL") || strings.Contains(line, "_test.go:") && !strings.Contains(line, "not through a relay") {
			failed = append(failed, line)
		}
	}
	if err != nil {
		t.Fatalf("the suites through a relay: %v\n%s", err, strings.Join(failed, "\n"))
	}
	if !strings.Contains(string(out), "--- PASS: TestSotW") {
		t.Fatalf("the suites through a relay ran nothing:\n%s", out)
	}
}
