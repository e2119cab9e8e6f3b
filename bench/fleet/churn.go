package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// churnCase is one row of the churn table.
type churnCase struct {
	impl     string // "pylon" or "gcp"
	via      string // pylon: "api" or "file"
	n        int
	clusters int
	rate     int // changes per second asked
	subs     int // services each proxy subscribes to over EDS
	duration time.Duration
	delta    bool
	perConn  int
	profile  string
}

const churnHeader = "| server (way in) | N | services (per proxy) | changes/s asked (issued) | changes | convergence p50 / p99 / max | not converged | server CPU (cores) | RSS (above the server's before the fleet, per proxy) | EDS responses per proxy per s | bytes per proxy per s | load (1 min) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"

// measureChurn prints the churn table: a row per rate, proxy count,
// server and way in.
func measureChurn(ns, rates, impls, vias string, cc churnCase) {
	fmt.Println(churnHeader)
	for _, rate := range ints(rates) {
		for _, n := range ints(ns) {
			for _, impl := range strings.Split(impls, ",") {
				ways := strings.Split(vias, ",")
				if strings.HasPrefix(impl, "gcp") {
					ways = []string{"cache"}
				}
				for _, via := range ways {
					row := cc
					row.impl, row.via, row.n, row.rate = impl, via, n, rate
					row.delta = speaksDelta(impl, cc.delta, false)
					r, err := runChurn(row)
					if err != nil {
						fmt.Fprintf(os.Stderr, "churn %s/%s n=%d rate=%d: %v\n", impl, via, n, rate, err)
						continue
					}
					fmt.Println(r)
				}
			}
		}
	}
}

// runChurn runs one churn row: the server in its own process with the
// world, the fleet connected and configured, then the schedule's changes
// issued at the rate for the duration; then up to 30s for the last ones
// to reach every subscribed proxy.
func runChurn(cc churnCase) (string, error) {
	dir, err := os.MkdirTemp("", "pylon-churn-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	serveAs := "gcp-churn"
	// pylon@PATH: Pylon as another build of this benchmark serves it, to
	// compare two builds in one run.
	name, bin, other := strings.Cut(cc.impl, "@")
	switch {
	case name == "gcp":
	case cc.via == "api":
		serveAs = "pylon-api"
	case cc.via == "file":
		serveAs = "pylon-file"
		if err := writeChurnFile(dir, cc.clusters, nil); err != nil {
			return "", err
		}
	case cc.via == "kube":
		serveAs = "pylon-kube"
	default:
		return "", fmt.Errorf("-via: %q is neither api, file nor kube", cc.via)
	}
	var kube *kubeAPI
	if serveAs == "pylon-kube" {
		if kube, err = kubeWorld(dir, cc.clusters); err != nil {
			return "", err
		}
		defer kube.stop()
	}
	child := serveAs
	if other {
		child += "@" + bin
	}
	c, err := startChild(child, cc.clusters, "-dir", dir)
	if err != nil {
		return "", err
	}
	defer c.stop()
	total := cc.rate * int(cc.duration/time.Second)
	f := newFleet(cc.n, cc.clusters, cc.delta, cc.perConn)
	if kube != nil {
		f.prefixNames(kubeNS + "/")
	}
	f.churn = newChurnTracker(cc.n, cc.clusters, cc.subs, total)
	// A proxy refused at the cold start (RESOURCE_EXHAUSTED while the
	// server is busy with initial configs) retries; presenting what it
	// got on the refused stream, it may be spared every response (X24)
	// and so never count as having its first config here, though the
	// server has it SYNCED. Retrying as a new proxy, it is sent all.
	f.present = false
	if err := f.dial(c.xds); err != nil {
		return "", err
	}
	defer f.close()
	rss0 := c.rss()
	f.open(nil)
	if _, err := waitFor(&f.ready, int64(f.n), 10*time.Minute); err != nil {
		return "", fmt.Errorf("first config: %w", err)
	}
	time.Sleep(time.Second) // let ACKs settle before the clock starts
	issue, err := churnIssuer(serveAs, c, dir, cc.clusters, kube)
	if err != nil {
		return "", err
	}
	f.bytes.Store(0)
	cpu0, start := c.cpu(), time.Now()
	var stopProfile func()
	if cc.profile != "" && name == "pylon" {
		stopProfile = churnProfile(c, fmt.Sprintf("%s/churn-%s-%s-%d-%d", cc.profile, strings.NewReplacer("/", "_", "@", "-").Replace(cc.impl), cc.via, cc.n, cc.rate))
	}
	failures, firstErr := drive(f.churn, start, total, cc, issue, serveAs == "pylon-api")
	elapsed := time.Since(start)
	cpu, rss := c.cpu()-cpu0, c.rss()
	load := loadAvg()
	bytes, eds := f.bytes.Load(), f.churn.edsResponses.Load()
	if stopProfile != nil {
		stopProfile()
	}
	grace := time.Now().Add(30 * time.Second)
	for f.churn.pending() > 0 && time.Now().Before(grace) {
		time.Sleep(100 * time.Millisecond)
	}
	lat := f.churn.latencies()
	pending := f.churn.pending()
	if failures > 0 {
		fmt.Fprintf(os.Stderr, "churn %s/%s n=%d rate=%d: %d changes refused or failed, the first with: %v\n", cc.impl, cc.via, cc.n, cc.rate, failures, firstErr)
	}
	if e := f.failures(); e != "" {
		fmt.Fprintf(os.Stderr, "churn %s/%s n=%d rate=%d: %s\n", cc.impl, cc.via, cc.n, cc.rate, e)
	}
	mode := "SotW"
	if cc.delta {
		mode = "delta"
	}
	secs := elapsed.Seconds()
	return fmt.Sprintf("| %s (%s, %s) | %d | %d (%d) | %d (%.0f) | %d | %s / %s / %s | %d | %.2f | %.0f MB (%.1f KiB) | %.1f | %.0f B | %s |",
		cc.impl, cc.via, mode, cc.n, cc.clusters, f.churn.subs, cc.rate, float64(f.churn.issuedN.Load())/secs, f.churn.issuedN.Load(),
		ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), ms(percentile(lat, 1)), pending,
		cpu/secs, rss/(1<<20), (rss-rss0)/float64(cc.n)/1024, float64(eds)/float64(cc.n)/secs, float64(bytes)/float64(cc.n)/secs, load), nil
}

// churnIssuer is how change k reaches the server: a registration or
// deregistration through the admin API (one call per change), the config
// file rewritten with every change up to k, the EndpointSlices changed up
// to k updated through the Kubernetes API, or go-control-plane's control
// endpoint told how many are due.
func churnIssuer(serveAs string, c *child, dir string, clusters int, kube *kubeAPI) (func(k int, at time.Time) error, error) {
	switch serveAs {
	case "pylon-kube":
		return func(k int, _ time.Time) error { return kube.upto(k + 1) }, nil
	case "pylon-api":
		api, err := newChurnAPI(c.ctl, dir, clusters)
		if err != nil {
			return nil, err
		}
		return api.issue, nil
	case "pylon-file":
		fw := &churnFile{dir: dir, st: newChurnState(clusters)}
		return func(k int, _ time.Time) error { return fw.upto(k + 1) }, nil
	}
	return func(k int, _ time.Time) error { _, err := c.post(fmt.Sprintf("/churn?upto=%d", k+1)); return err }, nil
}

// drive issues the schedule's changes at cc.rate for cc.duration: change
// k is due at begin + k/rate. Through the API, apiWorkers make the calls
// (a call is issued when it starts; workers that fall behind lower the
// rate issued, which the table shows); otherwise one goroutine issues
// every change due so far, each stamped with when it was due. It returns
// how many changes failed, and the first failure.
func drive(t *churnTracker, begin time.Time, total int, cc churnCase, issue func(int, time.Time) error, concurrent bool) (int64, error) {
	var failed atomic.Int64
	var first atomic.Pointer[error]
	fail := func(n int, err error) {
		failed.Add(int64(n))
		first.CompareAndSwap(nil, &err)
	}
	firstErr := func() error {
		if e := first.Load(); e != nil {
			return *e
		}
		return nil
	}
	due := func(k int) time.Time { return begin.Add(time.Duration(k) * time.Second / time.Duration(cc.rate)) }
	if !concurrent {
		for k := 0; k < total; {
			now := time.Now()
			last := k
			for last < total && !due(last).After(now) {
				t.issue(last, due(last))
				last++
			}
			if last > k {
				if err := issue(last-1, now); err != nil {
					fail(last-k, err)
				}
				k = last
			}
			time.Sleep(10 * time.Millisecond)
		}
		return failed.Load(), firstErr()
	}
	jobs := make(chan int, apiWorkers)
	var wg sync.WaitGroup
	for range apiWorkers {
		wg.Go(func() {
			for k := range jobs {
				t.issue(k, time.Now())
				if err := issue(k, time.Now()); err != nil {
					fail(1, err)
				}
			}
		})
	}
	for k := range total {
		time.Sleep(time.Until(due(k)))
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	return failed.Load(), firstErr()
}

// apiWorkers is how many API calls the churn makes at once, each on a
// connection of its own: the registrants of a fleet. Each call waits for
// its store commit (an fsync shared by the calls waiting with it), so
// the rate one worker issues is bounded by that wait: 64 workers issued
// 800 of the 1,000 changes a second asked.
const apiWorkers = 128

// churnAPI makes the changes as registrations and deregistrations
// through the admin API, with the write token of the server's data
// folder.
type churnAPI struct {
	base, token string
	clusters    int
	client      *http.Client
}

func newChurnAPI(admin, dir string, clusters int) (*churnAPI, error) {
	tok, err := os.ReadFile(filepath.Join(dir, "data", "admin-token"))
	if err != nil {
		return nil, err
	}
	return &churnAPI{
		base: "http://" + admin, token: strings.TrimSpace(string(tok)), clusters: clusters,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: apiWorkers, MaxConnsPerHost: apiWorkers}},
	}, nil
}

func (a *churnAPI) issue(k int, _ time.Time) error {
	c := churnAt(k, a.clusters)
	svc := clusterName(c.cluster)
	var req *http.Request
	var err error
	if c.dereg {
		req, err = http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/v1/services/%s/endpoints/%s:8080", a.base, svc, seqAddr(c.seq)), nil)
	} else {
		body := fmt.Sprintf(`{"address":%q,"port":8080}`, seqAddr(c.seq))
		req, err = http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/services/%s/endpoints", a.base, svc), strings.NewReader(body))
	}
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return nil
}

// churnFile makes the changes by rewriting the config file as a deploy
// tool does: written aside, then renamed into place.
type churnFile struct {
	dir string
	st  *churnState
}

func (w *churnFile) upto(k int) error {
	w.st.advance(k)
	return writeChurnFile(w.dir, w.st.clusters, w.st)
}

func writeChurnFile(dir string, clusters int, st *churnState) error {
	doc, err := churnDoc(clusters, st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".config.json.tmp")
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "config.json"))
}

// churnProfile takes a CPU profile of the daemon over the first 10s of
// the churn, from the pprof address the daemon child serves besides the
// admin API (whose pprof needs the read token).
func churnProfile(c *child, file string) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c.pprof == "" {
			return
		}
		fetch(&child{ctl: c.pprof}, "/debug/pprof/profile?seconds=10", file+".cpu")
	}()
	return func() { <-done }
}

// loadAvg is the machine's 1-minute load average, for the table: other
// work on the two cores changes every figure.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
