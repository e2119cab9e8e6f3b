package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// failoverHeader is the failover table's head.
const failoverHeader = "| server | N | clusters | proxies present what they hold | all SYNCED on B after the kill: p50 / p99 / max | of which after the stream opened on B: p50 / p99 / max | B sent per proxy: resources (CDS / EDS / LDS / RDS) | B sent per proxy: bytes | spared by X24 per proxy: resources / bytes | CPU over the failover: B (the proxies) | B RSS after |\n" +
	"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"

// failover measures a replica killed under its proxies. Two servers A and
// B serve the same world (as two replicas on one etcd do: the same store
// revision gives byte-identical resources and versions); every proxy
// reaches its full config on A and ACKs it (A reports all of them
// SYNCED); A is killed with SIGKILL; each proxy's stream ends UNAVAILABLE,
// it waits Envoy's backoff and opens a stream to B, presenting what it
// holds if present says so. Measured on B: when each proxy is SYNCED
// again, what B sent, B's CPU from the kill until the last is SYNCED, and
// B's RSS then.
func failover(fc failoverCase) (string, error) {
	impl, n, clusters := fc.impl, fc.n, fc.clusters
	a, err := startChild(impl, clusters, "-watch")
	if err != nil {
		return "", err
	}
	defer a.stop()
	b, err := startChild(impl, clusters, "-watch")
	if err != nil {
		return "", err
	}
	defer b.stop()
	f := newFleet(n, clusters, fc.delta, fc.perConn)
	f.present = fc.present
	if err := f.dial(a.xds, b.xds); err != nil {
		return "", err
	}
	defer f.close()
	profile := ""
	if fc.profile != "" {
		profile = fmt.Sprintf("%s/failover-%s-%s-%d-%d-present=%v.cpu", fc.profile, impl, fc.mode(), n, clusters, fc.present)
	}
	r, err := killA(f, a, b, profile)
	if stopErr := f.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return "", err
	}
	if e := f.failures(); e != "" {
		fmt.Fprintf(os.Stderr, "failover %s n=%d clusters=%d: %s\n", impl, n, clusters, e)
	}
	fmt.Fprintf(os.Stderr, "failover %s n=%d clusters=%d present=%v: proxies received %.0f resources, %.0f B each; %d streams retried; status tracker on B: %s\n",
		impl, n, clusters, fc.present, float64(f.resources.Load())/float64(n), float64(f.bytes.Load())/float64(n), f.retries.Load(), states(r.States))
	return failoverRow(fc, r), nil
}

// failoverCase is one row of the failover table.
type failoverCase struct {
	impl                 string
	n, clusters, perConn int
	delta, present       bool
	// profile, if set, is a folder for B's CPU profile over the first 3 s
	// after the kill.
	profile string
}

func (fc failoverCase) mode() string {
	if fc.delta {
		return "delta"
	}
	return "SotW"
}

// failoverResult is what one failover measured.
type failoverResult struct {
	syncReport           // B's
	kill       time.Time // when A was killed
	// cpuB and cpuProxies are B's and the simulated proxies' (this
	// process's) CPU seconds from the kill to the last SYNCED; rss is B's
	// resident memory then.
	cpuB, cpuProxies, rss float64
}

// killA brings the fleet up on A, kills A and waits until B reports every
// proxy SYNCED. With profile, B's CPU profile of the 3 s from the kill is
// written there.
func killA(f *fleet, a, b *child, profile string) (failoverResult, error) {
	f.open(nil)
	if _, err := waitFor(&f.ready, int64(f.n), 10*time.Minute); err != nil {
		return failoverResult{}, fmt.Errorf("first config on A: %w", err)
	}
	// Every ACK in: A reports each proxy SYNCED.
	if r, err := a.synced(f.n, time.Minute); err != nil || len(r.Synced) < f.n {
		return failoverResult{}, fmt.Errorf("server A: %d of %d proxies SYNCED (%v)", len(r.Synced), f.n, err)
	}
	if _, err := b.post("/mark"); err != nil {
		return failoverResult{}, err
	}
	f.bytes.Store(0)
	f.resources.Store(0)
	f.retries.Store(0)
	var profiled sync.WaitGroup
	if profile != "" {
		profiled.Go(func() { fetch(b, "/debug/pprof/profile?seconds=3", profile) })
		time.Sleep(50 * time.Millisecond) // the profile has started
	}
	cpu0, self0 := b.cpu(), procCPU("self")
	r := failoverResult{kill: time.Now()}
	a.stop() // SIGKILL
	var err error
	r.syncReport, err = b.synced(f.n, 10*time.Minute)
	r.cpuB, r.cpuProxies, r.rss = b.cpu()-cpu0, procCPU("self")-self0, b.rss()
	profiled.Wait()
	if err == nil && len(r.Synced) < f.n {
		err = fmt.Errorf("server B: %d of %d proxies SYNCED after 10 minutes; status tracker: %s", len(r.Synced), f.n, states(r.States))
	}
	return r, err
}

// synced waits, at most limit, until the server reports n proxies SYNCED
// since its last mark, and returns its report.
func (c *child) synced(n int, limit time.Duration) (syncReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/synced?n=%d&wait=%s", c.ctl, n, limit)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return syncReport{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return syncReport{}, err
	}
	defer resp.Body.Close()
	var r syncReport
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET /synced: %s", resp.Status)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

func failoverRow(fc failoverCase, r failoverResult) string {
	n := fc.n
	lat := make([]time.Duration, 0, len(r.Synced))
	took := make([]time.Duration, 0, len(r.Took))
	for node, at := range r.Synced {
		lat = append(lat, time.Duration(at-r.kill.UnixNano()))
		took = append(took, time.Duration(r.Took[node]))
	}
	reg := xdstype.New()
	var total sentCount
	perType := map[string]float64{}
	for url, c := range r.Sent {
		total.Resources += c.Resources
		total.Bytes += c.Bytes
		total.SparedResources += c.SparedResources
		total.SparedBytes += c.SparedBytes
		if t := reg.Lookup(url); t != nil {
			perType[t.Abbrev] = float64(c.Resources) / float64(n)
		}
	}
	yes := "no (baseline)"
	if fc.present {
		yes = "yes"
	}
	per := func(v int64) float64 { return float64(v) / float64(n) }
	return fmt.Sprintf("| %s (%s) | %d | %d | %s | %s / %s / %s | %s / %s / %s | %.1f (%.1f / %.1f / %.1f / %.1f) | %.0f B | %.1f / %.0f B | %.2f s (%.2f s) | %.0f MB |",
		fc.impl, fc.mode(), n, fc.clusters, yes,
		ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), ms(percentile(lat, 1)),
		ms(percentile(took, 0.5)), ms(percentile(took, 0.99)), ms(percentile(took, 1)),
		per(total.Resources), perType["CDS"], perType["EDS"], perType["LDS"], perType["RDS"],
		per(total.Bytes), per(total.SparedResources), per(total.SparedBytes), r.cpuB, r.cpuProxies, r.rss/(1<<20))
}

// states prints the status tracker's counts of types by state.
func states(m map[string]int) string {
	var out []string
	for s, n := range m {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s %d", s, n))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
