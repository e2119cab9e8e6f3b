package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// The relay tier (-tier relay): the fleet connects to a `pylon relay`
// instead of the Pylon it measures. The upstream is -impl's daemon
// (pylon-file or pylon-api, `pylon serve` changed through its config file
// or its admin API) in one process; the relay, in another with its own
// data folder, holds one upstream stream per key (the simulated proxies
// all have cluster "bench": with the default --key {cluster}, one). A
// change is made at the upstream and measured at the proxies, as in the
// direct rows; CPU and memory are each process's own.

// tiers are the -tier values.
var tiers = map[string]bool{"direct": true, "relay": true}

// checkTier says what is wrong with -tier for these -impl servers and
// scenario, "" if nothing.
func checkTier(tier, impls string, scenario bool) string {
	relay := false
	for _, t := range strings.Split(tier, ",") {
		if !tiers[t] {
			return fmt.Sprintf("-tier: %q is neither direct nor relay", t)
		}
		relay = relay || t == "relay"
	}
	if !relay {
		return ""
	}
	if scenario {
		return "-tier relay: only in the fleet scenario, not with -churn, -failover or -ab"
	}
	for _, impl := range strings.Split(impls, ",") {
		if _, ok := daemonImpl(impl); !ok {
			return fmt.Sprintf("-tier relay: -impl %s is not a daemon; the relay's upstream is pylon-file or pylon-api", impl)
		}
	}
	return ""
}

// upstreamResult is what the upstream of a relay measured in a run.
type upstreamResult struct {
	cpu, cpuRoute, cpuFirst, cpuRe float64 // per EDS and route change, first config, reconnect
	rss                            float64 // after a GC, the fleet connected
	streams                        float64 // xDS streams it serves (pylon_xds_streams): the relay's
	bytes, bytesRoute, bytesFirst  float64 // response bytes it sent per EDS and route change, and until the fleet's first config
	keys, opened                   float64 // the relay's keys and upstream streams opened so far
}

// upstreamCPU is the CPU seconds so far of the upstream feeding c, 0
// when c has none.
func (c *child) upstreamCPU() float64 {
	if c.upstream == nil {
		return 0
	}
	return c.upstream.cpu()
}

// upstreamBytes is the response bytes the upstream feeding c has sent so
// far (pylon_xds_response_bytes_total), 0 when c has none.
func (c *child) upstreamBytes() float64 {
	if c.upstream == nil {
		return 0
	}
	return max(metricSum(c.upstream.ctl, "pylon_xds_response_bytes_total"), 0)
}

// debugAddr is where the child serves /gc and pprof: a daemon's own
// address (its admin API's want a token), else the control endpoint.
func (c *child) debugAddr() string {
	if c.pprof != "" {
		return c.pprof
	}
	return c.ctl
}

// startTier starts impl's server for the tier: in the relay tier, a relay
// in front of impl's daemon.
func startTier(impl string, clusters int, tier string) (*child, error) {
	via, ok := daemonImpl(impl)
	switch {
	case ok && tier == "relay":
		return startRelayTier(impl, via, clusters)
	case ok:
		return startDaemonChild(impl, via, clusters)
	}
	return startChild(impl, clusters)
}

// startRelayTier starts impl's daemon as the upstream and a relay in front
// of it; the child returned is the relay, whose changes are made at the
// upstream and whose stop stops both.
func startRelayTier(impl, via string, clusters int) (*child, error) {
	up, err := startDaemonChild(impl, via, clusters)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pylon-fleet-relay-")
	if err != nil {
		up.stop()
		return nil, err
	}
	c, err := startChild("relay", clusters, "-dir", dir, "-upstream", up.xds)
	if err != nil {
		up.stop()
		os.RemoveAll(dir)
		return nil, err
	}
	c.upstream, c.change = up, up.change
	c.cleanup = func() { up.stop(); os.RemoveAll(dir) }
	return c, nil
}

// serveRelay runs `pylon relay --upstream UPSTREAM` (daemon.RunRelay, as
// the command runs it) over dir/data until killed: xDS and admin on
// loopback ports, pprof and /gc on a third, printed on one line.
func serveRelay(dir, upstream string) error {
	prof, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	http.HandleFunc("POST /gc", collect)
	go func() { _ = http.Serve(prof, nil) }()
	o := daemon.Options{
		XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Identifier: "pylon-bench-relay",
		// The simulator multiplexes -streams-per-conn proxies on one
		// connection: lift the per-connection stream bound, as the
		// upstream's.
		MaxStreamsPerConnection: 1 << 20,
		Logger:                  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnReady:                 func(x, a string) { fmt.Printf("%s %s %s\n", x, a, prof.Addr()) },
	}
	return daemon.RunRelay(context.Background(), o, daemon.RelayOptions{Upstreams: []string{upstream}, ID: "relay-bench"})
}

// metricSum is the sum of a metric's samples (every label) at a Pylon
// admin address's /metrics, -1 if it cannot be read.
func metricSum(addr, name string) float64 {
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, m := range fams[name].GetMetric() {
		sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return sum
}

// readUpstream records, the fleet connected and served, the upstream's
// memory after a GC, the streams it serves and the relay's keys.
func readUpstream(c *child, r *result) {
	if c.upstream == nil {
		return
	}
	if _, err := c.upstream.post("/gc"); err != nil {
		fmt.Fprintln(os.Stderr, "upstream GC:", err)
	}
	r.up.rss = c.upstream.rss()
	r.up.bytesFirst = c.upstreamBytes()
	r.up.streams = metricSum(c.upstream.ctl, "pylon_xds_streams")
	r.up.keys = metricSum(c.ctl, "pylon_relay_keys")
	r.up.opened = metricSum(c.ctl, "pylon_relay_upstream_streams_total")
}

const tierHeader = "| tier (variant) | N | all connected and SYNCED (CPU server / upstream) | EDS change p50 / p99 | route change p50 / p99 | bytes per proxy: first config, per EDS change | CPU per EDS change: server / upstream | CPU per route change: server / upstream | server RSS after GC (per proxy) | upstream RSS after GC; streams it serves; relay keys (upstream streams opened); upstream bytes sent: first config, per EDS, per route change | reconnect of all N: time; server CPU (per proxy); upstream CPU; bytes per proxy | load |\n" +
	"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"

// tierRow is the tier table's row of one run: the server is the relay in
// the relay tier, -impl's daemon in the direct one.
func tierRow(impl string, n int, delta bool, r *result, f *fleet, relay bool, load string) string {
	mode, tier := "SotW", "direct "+impl
	if delta {
		mode = "delta"
	}
	up := "-"
	if relay {
		tier = "relay, upstream " + impl
		up = fmt.Sprintf("%.0f MiB; %.0f; %.0f (%.0f); %.0f, %.0f, %.0f B", r.up.rss/(1<<20), r.up.streams, r.up.keys, r.up.opened,
			r.up.bytesFirst, r.up.bytes, r.up.bytesRoute)
	}
	return fmt.Sprintf("| %s (%s) | %d | %s (%.1f / %.1f s) | %s / %s | %s / %s | %.0f, %.0f B | %.3f / %.3f s | %.3f / %.3f s | %.0f MiB (%.1f KiB) | %s | %s; %.1f s (%.0f µs); %.2f s; %.0f B%s | %s |",
		tier, mode, n, ms(r.first), r.cpuFirst, r.up.cpuFirst,
		ms(percentile(r.lat, 0.5)), ms(percentile(r.lat, 0.99)), ms(percentile(r.routeLat, 0.5)), ms(percentile(r.routeLat, 0.99)),
		r.bytesFirst, r.bytesPer, r.cpu, r.up.cpu, r.cpuRoute, r.up.cpuRoute, r.rssAll/(1<<20), r.rssGC/1024, up,
		ms(r.reconnect), r.cpuRe, r.cpuRe/float64(n)*1e6, r.up.cpuRe, r.bytesRe, r.endedRe, load)
}

// measureTiers prints the tier table: a row per cluster count, proxy
// count, server and tier.
func measureTiers(ns, cs, impls, tier string, delta bool, perConn int, ch changes, profile string) {
	fmt.Println(tierHeader)
	for _, c := range ints(cs) {
		for _, n := range ints(ns) {
			for _, impl := range strings.Split(impls, ",") {
				for _, t := range strings.Split(tier, ",") {
					r, err := runTier(impl, n, c, delta, perConn, ch, profile, t)
					if err != nil {
						fmt.Fprintf(os.Stderr, "%s %s n=%d clusters=%d: %v\n", t, impl, n, c, err)
						continue
					}
					fmt.Println(r)
				}
			}
		}
	}
}
