// Package churn_test runs sustained endpoint churn through the whole
// daemon (embedded store, admin API, real xDS streams on loopback) and
// checks that no proxy is left behind: once the changes stop, every
// stream, SotW and delta, holds exactly the final config (issue 18).
// Not timed: the fleet benchmark (bench/fleet -churn) measures the speed.
package churn_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	services = 12
	// perService changes are made to each service, one registrant per
	// service making them in order (so the final state does not depend on
	// how the registrants interleave): registrations of endpoints 0, 1,
	// 2, ..., each after the first keep followed by the deregistration of
	// the endpoint registered keep before it.
	perService = 200
	keep       = 3
	sotw       = 16 // SotW ADS streams
	delta      = 16 // delta ADS streams
	// bound bounds the churn; settleBound the wait, after the last
	// change, for every proxy to hold it.
	bound       = 60 * time.Second
	settleBound = 10 * time.Second
	// pace is the changes a second all registrants make together: the
	// churn lasts about four seconds, so that it spans dozens of
	// publishes (the store paces them at least 100 ms apart) and the
	// proxies apply many intermediate states, not only the last.
	pace = services * perService / 4
	// minApplied is the fewest responses each proxy that ACKs at once
	// must apply while the changes are made: about 40 publishes reach it.
	minApplied = 10
)

// change is the i-th change of service s: a registration or a
// deregistration of endpoint seq.
func change(i int) (seq int, dereg bool) {
	if i < keep {
		return i, false
	}
	j := i - keep
	if j%2 == 0 {
		return keep + j/2, false
	}
	return j / 2, true
}

func endpointAddr(s, seq int) string { return fmt.Sprintf("10.200.%d.%d", s, seq) }

func serviceName(s int) string { return fmt.Sprintf("svc-%02d", s) }

// expected is what each service holds once every change is made: its two
// static endpoints and the last keep registered.
func expected() map[string][]string {
	out := map[string][]string{}
	for s := range services {
		name := serviceName(s)
		reg := map[int]bool{}
		for i := range perService {
			seq, dereg := change(i)
			if dereg {
				delete(reg, seq)
			} else {
				reg[seq] = true
			}
		}
		eps := []string{fmt.Sprintf("10.100.%d.1:8000", s), fmt.Sprintf("10.100.%d.2:8000", s)}
		for seq := range reg {
			eps = append(eps, endpointAddr(s, seq)+":8080")
		}
		slices.Sort(eps)
		out[name] = eps
	}
	return out
}

// document is the world: the services with two static endpoints each, a
// route table naming them, a listener, and the probe Runtime resource the
// proxies' Settle asks for.
func document() string {
	var b strings.Builder
	b.WriteString("version: 1\nservices:\n")
	for s := range services {
		fmt.Fprintf(&b, "- name: %s\n  endpoints:\n  - {address: 10.100.%d.1, port: 8000}\n  - {address: 10.100.%d.2, port: 8000}\n", serviceName(s), s, s)
	}
	b.WriteString("routes:\n- name: main\n  virtual_hosts:\n  - name: all\n    domains: [\"*\"]\n    routes:\n")
	for s := range services {
		fmt.Fprintf(&b, "    - {match: {prefix: /%s/}, to: [{service: %s}]}\n", serviceName(s), serviceName(s))
	}
	b.WriteString("listeners:\n- {name: ingress, port: 10000, routes: main}\n")
	b.WriteString("resources:\n- \"@type\": type.googleapis.com/envoy.service.runtime.v3.Runtime\n  name: " + xdstest.ProbeName + "\n")
	return b.String()
}

// seed stores the world in a new embedded store, as `pylon apply` would.
func seed(t *testing.T, dataDir string) {
	t.Helper()
	st, err := bolt.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := xdstype.New()
	changes, err := configstore.Objects(reg, []byte(document()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := configstore.New(configstore.Options{Store: st, Registry: reg}).Commit(context.Background(), changes, "churn world", false); err != nil {
		t.Fatal(err)
	}
}

type daemonAddrs struct{ xds, admin, token string }

// start runs the daemon on the seeded store in dataDir until the test ends.
func start(t *testing.T, dataDir string) daemonAddrs {
	t.Helper()
	d := daemontest.Start(t, daemon.Options{DataDir: dataDir, Identifier: "pylon-churn", Resync: -1})
	return daemonAddrs{xds: d.XDS, admin: d.Admin, token: d.Token(t, "admin-token")}
}

// registrant makes the changes of one service through the admin API, in
// order, and reports the first failure.
func registrant(ctx context.Context, c *http.Client, a daemonAddrs, s int, lim *rate.Limiter) error {
	svc := serviceName(s)
	for i := range perService {
		if err := lim.Wait(ctx); err != nil {
			return err
		}
		seq, dereg := change(i)
		addr := endpointAddr(s, seq)
		method, path, body := http.MethodPost, "/v1/services/"+svc+"/endpoints", fmt.Sprintf(`{"address":%q,"port":8080}`, addr)
		if dereg {
			method, path, body = http.MethodDelete, "/v1/services/"+svc+"/endpoints/"+addr+":8080", ""
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://"+a.admin+path, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	return nil
}

// TestChurnLeavesNoProxyBehind: a few dozen SotW and delta proxies hold
// the world; registrants make services*perService changes through the
// admin API, paced over a few seconds, while the proxies apply what they
// receive (a quarter of them keeping their EDS ACKs back until the churn
// is over, as a proxy that cannot keep up), each of the others applying
// many intermediate states; then every proxy, settled, holds exactly the
// final endpoints of every service.
func TestChurnLeavesNoProxyBehind(t *testing.T) {
	dataDir := t.TempDir()
	seed(t, dataDir)
	a := start(t, dataDir)
	conn := xdstest.Dial(t, a.xds)
	proxies := openProxies(t, conn)

	tr := &http.Transport{MaxIdleConnsPerHost: services}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: bound}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	lim := rate.NewLimiter(pace, services)
	var wg sync.WaitGroup
	for s := range services {
		wg.Go(func() {
			if err := registrant(ctx, client, a, s, lim); err != nil {
				t.Errorf("registrant of %s: %v", serviceName(s), err)
				cancel()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	applied := follow(t, proxies, done)
	<-done
	if t.Failed() {
		t.FailNow()
	}
	total := 0
	for i, n := range applied {
		total += n
		if !proxies[i].Slow[xdstype.EndpointURL] && n < minApplied {
			t.Errorf("proxy %d (%s) applied %d responses while the changes were made, want at least %d: the churn was not followed as it went", i, kind(i), n, minApplied)
		}
	}
	t.Logf("%d changes; the proxies applied %d responses while they were made", services*perService, total)

	want := expected()
	converge(t, proxies, want)
	for i, p := range proxies {
		// Nothing else may come after: a late stale push would show here.
		p.Settle()
		for _, v := range p.Violations {
			t.Errorf("proxy %d: %s", i, v)
		}
		if len(p.Endpoints) != services {
			t.Errorf("proxy %d holds %d assignments, want %d", i, len(p.Endpoints), services)
		}
		for svc, eps := range want {
			if got := held(p, svc); !slices.Equal(got, eps) {
				t.Errorf("proxy %d (%s), service %s: holds %v, want %v", i, kind(i), svc, got, eps)
			}
		}
	}
}

// converge applies what the proxies receive (the slow ones' ACKs
// released) until each holds want, failing with what the laggards hold
// if some do not within settleBound: the last registrations are stored
// when the API answers, and published within the store's debounce.
func converge(t *testing.T, proxies []*xdstest.Proxy, want map[string][]string) {
	t.Helper()
	for _, p := range proxies {
		p.ReleaseACKs()
	}
	limit := time.After(settleBound)
	for {
		behind := 0
		for _, p := range proxies {
			step(p)
			if !holds(p, want) {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		select {
		case <-limit:
			for i, p := range proxies {
				for svc, eps := range want {
					if got := held(p, svc); !slices.Equal(got, eps) {
						t.Errorf("proxy %d (%s) left behind, service %s: holds %v, want %v", i, kind(i), svc, got, eps)
					}
				}
			}
			t.Fatalf("%d of %d proxies did not reach the final config within %v of the last change", behind, len(proxies), settleBound)
		case <-time.After(time.Millisecond):
		}
	}
}

func holds(p *xdstest.Proxy, want map[string][]string) bool {
	for svc, eps := range want {
		if !slices.Equal(held(p, svc), eps) {
			return false
		}
	}
	return true
}

func kind(i int) string {
	if i < sotw {
		return "SotW"
	}
	return "delta"
}

// openProxies opens the SotW and delta proxies and brings each to the
// world; every fourth keeps its EDS ACKs back from then on.
func openProxies(t *testing.T, conn *grpc.ClientConn) []*xdstest.Proxy {
	t.Helper()
	var out []*xdstest.Proxy
	for i := range sotw + delta {
		p := xdstest.NewProxy(t, conn, "churn-"+strconv.Itoa(i), i >= sotw)
		p.Settle()
		if len(p.Endpoints) != services {
			t.Fatalf("proxy %d holds %d assignments at the start, want %d", i, len(p.Endpoints), services)
		}
		if i%4 == 3 {
			p.Slow[xdstype.EndpointURL] = true
		}
		out = append(out, p)
	}
	return out
}

// follow applies what the proxies receive until done, taking each
// proxy's waiting responses in turn; between rounds that found nothing it
// waits a millisecond for more (or done). It returns how many responses
// each proxy applied.
func follow(t *testing.T, proxies []*xdstest.Proxy, done <-chan struct{}) []int {
	t.Helper()
	applied := make([]int, len(proxies))
	limit := time.After(bound)
	for {
		round := 0
		for i, p := range proxies {
			n := step(p)
			applied[i] += n
			round += n
		}
		if round > 0 {
			continue
		}
		select {
		case <-done:
			return applied
		case <-limit:
			t.Fatalf("the churn did not end within %v", bound)
		case <-time.After(time.Millisecond):
		}
	}
}

// step applies what the proxy has received, at most 64 messages (the
// stream's buffer) so that no proxy starves the others; it returns how
// many it applied.
func step(p *xdstest.Proxy) int {
	for i := range 64 {
		n := p.Messages
		p.StepIfReady()
		if p.Messages == n {
			return i
		}
	}
	return 64
}

// held is the endpoints the proxy holds for svc, as ADDRESS:PORT, sorted.
func held(p *xdstest.Proxy, svc string) []string {
	var out []string
	for _, loc := range p.Endpoints[svc].GetEndpoints() {
		for _, e := range loc.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, sa.GetAddress()+":"+strconv.Itoa(int(sa.GetPortValue())))
		}
	}
	slices.Sort(out)
	return out
}
