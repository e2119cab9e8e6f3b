package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Bounds the dashboard must keep with a large fleet (generous for a
// shared 2-core machine; the measured figures are in docs/dashboard.md).
const (
	maxFirstRender = 10 * time.Second
	maxFilter      = 3 * time.Second
	maxHeap        = 64 << 20
	// streamsPerConn multiplexes the simulated proxies' streams on a few
	// connections, as the fleet benchmark does.
	streamsPerConn = 500
)

// TestLargeFleet connects a fleet of real ADS streams (default 1,000;
// -fleet 10000 for the documented figures) and measures the dashboard:
// the time to the first render of the overview and of the proxies page,
// the browser's JavaScript heap, the time a filter and a sort take to
// apply, and the API reads behind each poll.
func TestLargeFleet(t *testing.T) {
	n := *fleet
	if n == 0 {
		n = 1000
	}
	if testing.Short() {
		t.Skip("-short: the large fleet takes a while")
	}
	ctx := browser(t)
	p := startPylon(t, daemon.Options{MaxStreamsPerConnection: streamsPerConn})
	p.apply(t, document(false))

	start := time.Now()
	openFleet(t, p, n)
	t.Logf("%d streams connected and answered in %v", n, time.Since(start).Round(time.Millisecond))
	nacked := (n + 49) / 100 // i%100 == 50
	eventually(t, "every stream counted", func() bool {
		_, s := p.call(t, p.readToken, "GET", "/summary", nil)
		return summaryCount(s, "streams") == n
	})
	apiFigures(t, p)

	// Sign in once; the token stays in the tab's sessionStorage, so the
	// timed loads below are the dashboard's own.
	p.signIn(t, ctx, p.readToken)
	overview := timeLoad(t, ctx, "http://"+p.adminAddr+"/ui/#/overview", `document.querySelector('#stream-count')?.textContent === `+jsString(num(n))+
		` && [...document.querySelectorAll('#totals .badge')].some(b => b.textContent === `+jsString("NACKED "+num(nacked))+`)`)
	proxies := timeLoad(t, ctx, "http://"+p.adminAddr+"/ui/#/proxies", rows+` === 50 && document.querySelector('#match-count').textContent === `+jsString(num(n)+" of "+num(n)+" streams"))
	filter := timed(t, ctx, "a search", func() {
		run(t, ctx, "search", chromedp.SendKeys(chromedp.CSS(`#filter-q`), "canary-000"))
	}, rows+` === 10 && document.querySelector('#match-count').textContent.startsWith('10 of ')`)
	sortBy := timed(t, ctx, "a sort by state", func() {
		run(t, ctx, "clear and sort", eval(`(() => { const q = document.querySelector('#filter-q'); q.value = ''; q.dispatchEvent(new Event('input')); })()`))
		waitJS(t, ctx, "the whole list", `document.querySelector('#match-count').textContent.startsWith(`+jsString(num(n)+" of")+`)`)
		run(t, ctx, "sort", eval(`document.querySelector('th[data-sort="state"]').click()`))
	}, `document.querySelector('#proxies tbody tr')?.textContent.includes('NACKED')`)
	heap := jsHeap(t, ctx)
	t.Logf("fleet %d (%d NACKED): overview first render %v, proxies page first render %v, search applied in %v, sort by state in %v, JS heap %.1f MiB after GC",
		n, nacked, overview.Round(time.Millisecond), proxies.Round(time.Millisecond), filter.Round(time.Millisecond), sortBy.Round(time.Millisecond), float64(heap)/(1<<20))
	if overview > maxFirstRender || proxies > maxFirstRender || filter > maxFilter || sortBy > maxFilter || heap > maxHeap {
		t.Errorf("over a bound: first render %v / %v (max %v), filter %v, sort %v (max %v), heap %d (max %d)", overview, proxies, maxFirstRender, filter, sortBy, maxFilter, heap, maxHeap)
	}
}

// num formats n as the page does (en-US grouping).
func num(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func summaryCount(body, field string) int {
	var v map[string]any
	if err := jsonUnmarshal(body, &v); err != nil {
		return -1
	}
	f, _ := v[field].(float64)
	return int(f)
}

// timeLoad navigates to url (a full load) and times it until ready holds.
func timeLoad(t *testing.T, ctx context.Context, url, ready string) time.Duration {
	t.Helper()
	return timed(t, ctx, url, func() { run(t, ctx, "load "+url, chromedp.Navigate("about:blank"), chromedp.Navigate(url)) }, ready)
}

// timed runs act and times it until ready holds.
func timed(t *testing.T, ctx context.Context, what string, act func(), ready string) time.Duration {
	t.Helper()
	start := time.Now()
	act()
	waitJS(t, ctx, what, ready)
	return time.Since(start)
}

// jsHeap is the tab's used JavaScript heap after a garbage collection; it
// logs Chromium's own performance metrics of the page too (DOM nodes and
// heap).
func jsHeap(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if _, err := chromedp.Call(c, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		t.Fatalf("collect garbage: %v", err)
	}
	u, err := chromedp.Call(c, runtime.GetHeapUsage, cdp.Empty{})
	if err != nil {
		t.Fatalf("heap usage: %v", err)
	}
	if _, err := chromedp.Call(c, performance.Enable, performance.EnableParams{}); err != nil {
		t.Fatalf("performance metrics: %v", err)
	}
	m, err := chromedp.Call(c, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		t.Fatalf("performance metrics: %v", err)
	}
	got := map[string]float64{}
	for _, x := range m.Metrics {
		got[x.Name] = x.Value
	}
	t.Logf("chromium metrics: Nodes %.0f, JSHeapUsedSize %.1f MiB, JSHeapTotalSize %.1f MiB",
		got["Nodes"], got["JSHeapUsedSize"]/(1<<20), got["JSHeapTotalSize"]/(1<<20))
	return int64(u.UsedSize)
}

// apiFigures times the reads behind one poll of each page.
func apiFigures(t *testing.T, p *pylon) {
	t.Helper()
	for _, path := range []string{"/summary", "/proxies?limit=50", "/proxies?limit=50&sort=state", "/proxies?limit=50&q=canary-000", "/rollout", "/proxies"} {
		const tries = 5
		var took []time.Duration
		var size int
		for range tries {
			start := time.Now()
			resp, err := http.DefaultClient.Do(authed(t, p, path))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took, size = append(took, time.Since(start)), len(b)
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		t.Logf("GET %s: median %v, %d bytes", path, took[tries/2].Round(100*time.Microsecond), size)
	}
}

func authed(t *testing.T, p *pylon, path string) *http.Request {
	req, err := http.NewRequest("GET", "http://"+p.adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.readToken)
	return req
}

// openFleet opens n ADS streams, streamsPerConn per connection: node
// canary-NNNNN for one in ten, edge-NNNNN for the rest; each asks for the
// clusters and ACKs them, but one in a hundred NACKs. The streams stay
// open until the test ends.
func openFleet(t *testing.T, p *pylon, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conns := make([]*grpc.ClientConn, (n+streamsPerConn-1)/streamsPerConn)
	for i := range conns {
		conns[i] = xdstest.Dial(t, p.xdsAddr)
	}
	streams := make([]discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				s, err := oneProxy(ctx, conns[i%len(conns)], i)
				streams[i] = s
				if err != nil {
					errs <- fmt.Errorf("proxy %d: %w", i, err)
				}
			}
		})
	}
	deadline := time.After(2 * time.Minute)
	for i := range n {
		select {
		case work <- i:
		case <-deadline:
			i = n
		}
	}
	close(work)
	wg.Wait()
	// Ends every stream before the connections close (xdstest.Dial's
	// cleanup, registered earlier, runs later).
	t.Cleanup(cancel)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, s := range streams {
		if s == nil {
			t.Fatalf("proxy %d was not started within 2 minutes", i)
		}
	}
}

// oneProxy opens a stream, takes its clusters, ACKs (or NACKs) them, and
// leaves the stream open, its responses drained, until ctx ends.
func oneProxy(ctx context.Context, conn *grpc.ClientConn, i int) (discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, error) {
	id := fmt.Sprintf("edge-%05d", i)
	if i%10 == 1 {
		id = fmt.Sprintf("canary-%05d", i)
	}
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	node := &corev3.Node{Id: id, Cluster: "sim", UserAgentName: "sim-envoy", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "1"}}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: xdstype.ClusterURL}); err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	resp, err := recvWithin(wait, s)
	if err != nil {
		return nil, err
	}
	ack := &discoveryv3.DiscoveryRequest{TypeUrl: xdstype.ClusterURL, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
	if i%100 == 50 {
		ack.VersionInfo, ack.ErrorDetail = "", &rpcstatus.Status{Code: 3, Message: "simulated: cluster web refused"}
	}
	if err := s.Send(ack); err != nil {
		return nil, err
	}
	go func() {
		// Drain until the stream ends with the test's context.
		for {
			if _, err := s.Recv(); err != nil {
				return
			}
		}
	}()
	return s, nil
}

// recvWithin receives one response, giving up when ctx ends (the stream's
// own context is the fleet's).
func recvWithin(ctx context.Context, s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient) (*discoveryv3.DiscoveryResponse, error) {
	type result struct {
		r   *discoveryv3.DiscoveryResponse
		err error
	}
	got := make(chan result, 1)
	go func() {
		r, err := s.Recv()
		got <- result{r, err}
	}()
	select {
	case r := <-got:
		return r.r, r.err
	case <-ctx.Done():
		return nil, errors.New("no response within the bound")
	}
}
