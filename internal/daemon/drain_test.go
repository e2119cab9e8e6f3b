package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// running is a daemon serving the quickstart config in file mode on
// loopback, started by startDaemon.
type running struct {
	xdsAddr, adminAddr, readToken string
	// dataDir holds the token files.
	dataDir string
	// config is the config file served.
	config  string
	out     *lines
	cancel  context.CancelFunc
	now     chan struct{}
	nowOnce sync.Once
	errc    chan error
	// ended is when Run returned, once it has.
	ended time.Time
	err   error
	done  bool
}

// startDaemon runs the daemon with o (addresses, data folder and, in file
// mode (no Store given), the config file filled in) until the test ends; the context it runs under carries a
// stop-now channel (stopNow).
func startDaemon(t *testing.T, o Options) *running {
	t.Helper()
	dir := t.TempDir()
	if o.Store == "" {
		o.ConfigPath = filepath.Join(dir, "pylon.yaml")
		if err := os.WriteFile(o.ConfigPath, examples.Quickstart(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o.DataDir = filepath.Join(dir, "data")
	if err := os.Mkdir(o.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	o.XDSAddr, o.AdminAddr, o.Resync = "127.0.0.1:0", "127.0.0.1:0", -1
	if o.Identifier == "" {
		o.Identifier = "drain-test"
	}
	r := &running{config: o.ConfigPath, dataDir: o.DataDir, out: &lines{}, now: make(chan struct{}), errc: make(chan error, 1)}
	o.Logger = slog.New(slog.NewTextHandler(r.out, nil))
	ready := make(chan [2]string, 1)
	o.OnReady = func(x, a string) { ready <- [2]string{x, a} }
	ctx, cancel := context.WithCancel(WithStopNow(context.Background(), r.now))
	r.cancel = cancel
	go func() { r.errc <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		r.stopNow()
		r.wait(t, 30*time.Second)
	})
	select {
	case addrs := <-ready:
		r.xdsAddr, r.adminAddr = addrs[0], addrs[1]
	case err := <-r.errc:
		r.done = true
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start within 30s")
	}
	tok, err := os.ReadFile(filepath.Join(o.DataDir, "read-token"))
	if err != nil {
		t.Fatal(err)
	}
	r.readToken = strings.TrimSpace(string(tok))
	return r
}

// stopNow closes the stop-now channel (a second signal).
func (r *running) stopNow() { r.nowOnce.Do(func() { close(r.now) }) }

// wait waits up to d for Run to return, and records when it did.
func (r *running) wait(t *testing.T, d time.Duration) {
	t.Helper()
	if r.done {
		return
	}
	select {
	case r.err = <-r.errc:
		r.ended, r.done = time.Now(), true
		if r.err != nil {
			t.Errorf("Run: %v", r.err)
		}
	case <-time.After(d):
		t.Fatalf("Run did not return within %v of the stop", d)
	}
}

// readyz returns /readyz's code and status field.
func (r *running) readyz(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.adminAddr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	defer resp.Body.Close()
	var body struct{ Status string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		t.Fatalf("readyz body: %v", err)
	}
	return resp.StatusCode, body.Status
}

// proxyStream is /proxies' view of a stream.
type proxyStream struct {
	Replica string
	Node    string
	Address string
	Gone    *time.Time `json:"disconnectedAt"`
	Types   []struct {
		Type, State string
		ACKed       *struct{ Version string } `json:"acked"`
	}
}

// proxies reads /proxies with the read token.
func (r *running) proxies(t *testing.T) []proxyStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.adminAddr+"/proxies", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("proxies: %v", err)
	}
	defer resp.Body.Close()
	var body struct{ Streams []proxyStream }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("proxies: %d %v", resp.StatusCode, err)
	}
	return body.Streams
}

// proxy is a client connection of its own with one SotW ADS stream,
// SYNCED on Clusters, and the TCP connections it dialled.
type proxy struct {
	node  string
	conn  *grpc.ClientConn
	st    *xdstest.Stream
	mu    sync.Mutex
	dials []string // local addresses, in order
}

// connect dials addr on a connection of its own and syncs Clusters.
func connect(t *testing.T, addr, node string) *proxy {
	t.Helper()
	p := &proxy{node: node}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
			if err == nil {
				p.mu.Lock()
				p.dials = append(p.dials, c.LocalAddr().String())
				p.mu.Unlock()
			}
			return c, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p.conn = conn
	p.open(t)
	return p
}

// open opens a new ADS stream on the proxy's connection and syncs Clusters.
func (p *proxy) open(t *testing.T) {
	t.Helper()
	p.st = xdstest.OpenADS(t, p.conn, xdstest.Node(p.node))
	p.st.Request(xdstype.ClusterURL)
	p.st.ACK(p.st.RecvType(xdstype.ClusterURL))
}

// dialled returns the local addresses of the proxy's TCP connections.
func (p *proxy) dialled() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.dials)
}

// streamEnd is how and when a stream ended.
type streamEnd struct {
	node string
	at   time.Time
	err  error
}

// watchEnd reports when the proxy's current stream ends, within bound:
// responses meanwhile are read and dropped.
func (p *proxy) watchEnd(bound time.Duration, ends chan<- streamEnd) {
	st, deadline := p.st, time.Now().Add(bound)
	go func() {
		for time.Now().Before(deadline) {
			_, err := st.Next()
			if err == nil {
				continue
			}
			// Next's own timeout is not the stream's end: a gRPC status
			// (or EOF) is.
			if _, ok := status.FromError(err); ok || errors.Is(err, io.EOF) {
				ends <- streamEnd{node: p.node, at: time.Now(), err: err}
				return
			}
		}
		ends <- streamEnd{node: p.node}
	}()
}

// collect gathers n stream ends; a stream that did not end fails the test.
func collect(t *testing.T, ends <-chan streamEnd, n int) []streamEnd {
	t.Helper()
	out := make([]streamEnd, 0, n)
	for range n {
		e := <-ends
		if e.at.IsZero() {
			t.Fatalf("the stream of %s did not end", e.node)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b streamEnd) int { return a.at.Compare(b.at) })
	return out
}

// refused reports whether a new TCP connection to addr is refused.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// waitUntil polls cond every 5ms until it holds or d has passed, and says
// whether it held.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// TestDrain: the stop when Run's context ends, with five proxies on
// connections of their own and a 1s drain period. /readyz turns 503
// "draining" at once, before the streams end; a new connection is refused
// while the open ones go on; the streams end with UNAVAILABLE spread over
// the period; Run returns within the period plus the shutdown grace, and
// logs the drain's start (with the period and the streams) and its end.
func TestDrain(t *testing.T) {
	const n, period, grace = 5, time.Second, 2 * time.Second
	r := startDaemon(t, Options{DrainPeriod: period, ShutdownGrace: grace})
	ends := make(chan streamEnd, n)
	proxies := make([]*proxy, n)
	for i := range n {
		proxies[i] = connect(t, r.xdsAddr, "drain-"+string(rune('a'+i)))
	}
	if code, st := r.readyz(t); code != http.StatusOK {
		t.Fatalf("readyz before the stop: %d %s", code, st)
	}
	for _, p := range proxies {
		p.watchEnd(30*time.Second, ends)
	}

	stopped := time.Now()
	r.cancel()
	var notReady time.Time
	if !waitUntil(2*time.Second, func() bool {
		code, st := r.readyz(t)
		notReady = time.Now()
		return code == http.StatusServiceUnavailable && st == "draining"
	}) {
		t.Fatal(`readyz did not answer 503 "draining" within 2s of the stop`)
	}
	if !waitUntil(2*time.Second, func() bool { return refused(r.xdsAddr) }) {
		t.Fatal("a new xDS connection was still accepted 2s after the stop")
	}
	refusedAt := time.Now()

	got := collect(t, ends, n)
	r.wait(t, period+grace+2*time.Second)
	t.Logf("not ready after %v, new connections refused after %v; streams ended after %v",
		notReady.Sub(stopped), refusedAt.Sub(stopped), offsets(got, stopped))
	for _, e := range got {
		if status.Code(e.err) != codes.Unavailable {
			t.Errorf("the stream of %s ended with %v, want UNAVAILABLE", e.node, e.err)
		}
	}
	last := got[n-1].at
	if took := last.Sub(stopped); took > period+drainSlack(period) {
		t.Errorf("the last stream ended %v after the stop, beyond the period %v and its slack", took, period)
	}
	if took := r.ended.Sub(stopped); took > period+grace+time.Second {
		t.Errorf("Run returned %v after the stop, beyond drain period + shutdown grace", took)
	}
	out := r.out.String()
	if !strings.Contains(out, `msg="draining: not ready`) || !strings.Contains(out, "period=1s streams=5") {
		t.Errorf("no drain start line with period=1s streams=5 in the log:\n%s", out)
	}
	if !strings.Contains(out, `msg="drain ended: every stream handed over" took=`) {
		t.Errorf("no drain end line in the log:\n%s", out)
	}
	// Not ready and no new connections before the streams end, and the
	// open connections go on when the listener closes.
	if !notReady.Before(last) {
		t.Errorf("readyz turned 503 at %v, after the last stream ended (%v): not at once", notReady.Sub(stopped), last.Sub(stopped))
	}
	if !refusedAt.Before(last) {
		t.Errorf("new connections were refused only from %v, after the last stream ended (%v)", refusedAt.Sub(stopped), last.Sub(stopped))
	}
	// The spread: ended over the period, connection by connection, not
	// all at once. (Against a Drain that ends every stream at once, this
	// fails: they end within milliseconds.)
	if spread := last.Sub(got[0].at); spread < period*4/10 {
		t.Errorf("the streams ended within %v of each other (%v after the stop), want them spread over the %v period",
			spread, offsets(got, stopped), period)
	}
}

// TestDrainConfigStillFlows: the config keeps flowing during the drain:
// a change made once the drain has begun reaches a stream not yet handed
// over.
func TestDrainConfigStillFlows(t *testing.T) {
	const period = 4 * time.Second
	r := startDaemon(t, Options{DrainPeriod: period, ShutdownGrace: 2 * time.Second})
	proxies := []*proxy{connect(t, r.xdsAddr, "flow-a"), connect(t, r.xdsAddr, "flow-b")}
	held := proxies[0].st.Version[xdstype.ClusterURL]
	r.cancel()
	if !waitUntil(2*time.Second, func() bool { code, _ := r.readyz(t); return code == http.StatusServiceUnavailable }) {
		t.Fatal("readyz did not turn 503 within 2s of the stop")
	}
	cfg := bytes.Replace(examples.Quickstart(), []byte("connect_timeout: 1s"), []byte("connect_timeout: 3s"), 1)
	if err := os.WriteFile(r.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// Both streams: one of them may have been handed over already.
	updated := make(chan string, len(proxies))
	for _, p := range proxies {
		go func() {
			for {
				resp, err := p.st.Next()
				if err != nil {
					updated <- ""
					return
				}
				if resp.TypeUrl == xdstype.ClusterURL && resp.VersionInfo != held {
					updated <- resp.VersionInfo
					return
				}
			}
		}()
	}
	var got []string
	for range proxies {
		if v := <-updated; v != "" {
			got = append(got, v)
		}
	}
	if len(got) == 0 {
		t.Fatalf("no stream got the config changed during the drain:\n%s", r.out.String())
	}
	r.wait(t, period+5*time.Second)
}

// offsets are the ends' times after from.
func offsets(ends []streamEnd, from time.Time) []time.Duration {
	out := make([]time.Duration, len(ends))
	for i, e := range ends {
		out[i] = e.at.Sub(from).Round(time.Millisecond)
	}
	return out
}

// TestDrainPeriodZero: no drain period stops as before the drain existed:
// every stream ends at once and Run returns without waiting, with no
// drain logged. "At once" is against the one-minute shutdown grace Run
// would wait for streams still open: a sixth of it leaves a loaded 2-core
// machine room, and a stop that waits for the grace (or drains) fails.
func TestDrainPeriodZero(t *testing.T) {
	const n, grace = 3, time.Minute
	r := startDaemon(t, Options{ShutdownGrace: grace})
	ends := make(chan streamEnd, n)
	for i := range n {
		connect(t, r.xdsAddr, "nodrain-"+string(rune('a'+i))).watchEnd(30*time.Second, ends)
	}
	stopped := time.Now()
	r.cancel()
	got := collect(t, ends, n)
	r.wait(t, grace/2)
	if took := got[n-1].at.Sub(stopped); took > grace/6 {
		t.Errorf("with no drain period the streams ended %v after the stop, want at once", offsets(got, stopped))
	}
	if took := r.ended.Sub(stopped); took > grace/6 {
		t.Errorf("with no drain period Run returned %v after the stop, want at once (not waiting for the %v grace)", took, grace)
	}
	if out := r.out.String(); strings.Contains(out, "draining") {
		t.Errorf("a drain was logged with no drain period:\n%s", out)
	}
}

// TestDrainStopNow: a stop-now (the second signal) during a long drain
// ends it at once: Run returns within a small part of the two-minute
// period (an eighth: room for a loaded machine), not after it.
func TestDrainStopNow(t *testing.T) {
	const n, period = 3, 2 * time.Minute
	r := startDaemon(t, Options{DrainPeriod: period, ShutdownGrace: time.Minute})
	ends := make(chan streamEnd, n)
	for i := range n {
		connect(t, r.xdsAddr, "now-"+string(rune('a'+i))).watchEnd(period, ends)
	}
	r.cancel()
	if !waitUntil(10*time.Second, func() bool { code, _ := r.readyz(t); return code == http.StatusServiceUnavailable }) {
		t.Fatal("readyz did not turn 503 within 10s of the stop")
	}
	now := time.Now()
	r.stopNow()
	r.wait(t, period/4)
	collect(t, ends, n)
	if took := r.ended.Sub(now); took > period/8 {
		t.Errorf("Run returned %v after the stop-now, want at once (not the %v period)", took, period)
	}
	if out := r.out.String(); !strings.Contains(out, "drain cut short: stopping now") {
		t.Errorf("the log does not say the drain was cut short:\n%s", out)
	}
}

// blockingDrain is an xDS server whose drain never finishes by itself
// (streams that do not end): what the stop sequence must bound, whatever
// the xds package's progress. It stands for nothing else.
type blockingDrain struct {
	drainer
	calls atomic.Int32
}

func (b *blockingDrain) Drain(ctx context.Context, _ time.Duration) error {
	b.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestStopperCutShort: the stop sequence itself, on a real gRPC server, a
// real listener and a real admin server: not ready and no new
// connections at once, serving ends cleanly, a stop-now cancels the
// drain's context and the shutdown does not wait; without it, the drain
// is bounded by the period and its slack.
func TestStopperCutShort(t *testing.T) {
	for _, c := range []struct {
		name    string
		period  time.Duration
		stopNow bool
		within  time.Duration
		log     string
	}{
		{"stop now", time.Minute, true, 3 * time.Second, "drain cut short: stopping now"},
		{"bounded by the period", 500 * time.Millisecond, false, 500*time.Millisecond + drainSlack(500*time.Millisecond) + 2*time.Second, "drain ended at its bound"},
	} {
		t.Run(c.name, func(t *testing.T) {
			xsrv := xdstest.Start(t, xds.Options{})
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var out lines
			now := make(chan struct{})
			b := &blockingDrain{drainer: xsrv.XDS}
			s := &stopper{
				period: c.period, grace: 10 * time.Second, log: slog.New(slog.NewTextHandler(&out, nil)),
				gs: grpc.NewServer(), xds: b, lis: lis, now: now, streams: func() int { return 1 },
				http: &http.Server{ReadHeaderTimeout: time.Second},
			}
			served := make(chan error, 1)
			go func() { served <- s.serveXDS(lis) }()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				s.run(ctx, context.Background())
				done <- s.shutdown()
			}()
			start := time.Now()
			cancel()
			if !waitUntil(2*time.Second, s.Draining) {
				t.Fatal("not draining 2s after the stop")
			}
			if !waitUntil(2*time.Second, func() bool { return refused(lis.Addr().String()) }) {
				t.Fatal("new connections still accepted 2s after the stop")
			}
			if c.stopNow {
				waitUntil(2*time.Second, func() bool { return b.calls.Load() == 1 })
				close(now)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("shutdown: %v", err)
				}
			case <-time.After(c.within):
				t.Fatalf("the stop took longer than %v", c.within)
			}
			if err := <-served; err != nil {
				t.Fatalf("serving ended with %v: closing the listener is a clean stop", err)
			}
			if b.calls.Load() != 1 {
				t.Fatalf("Drain called %d times", b.calls.Load())
			}
			t.Logf("stopped in %v", time.Since(start))
			if !strings.Contains(out.String(), c.log) {
				t.Fatalf("log lacks %q:\n%s", c.log, out.String())
			}
		})
	}
}

// metrics returns the /metrics text.
func (r *running) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.adminAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metric returns the value of the series named exactly (name{labels}), 0
// when absent.
func (r *running) metric(t *testing.T, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(r.metrics(t), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
