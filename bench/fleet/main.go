// Command fleet is Pylon's fleet benchmark: N simulated Envoys on loopback
// against Pylon and against go-control-plane (v0.14, one shared
// SnapshotCache snapshot, ADS) in the same run, each server in its own
// process so that its CPU and memory are its own.
//
//	go run ./bench/fleet -n 1000,5000 -clusters 100,1000
//
// For each server and scenario it reports the time until every proxy has
// its first full config, the fan-out latency of an EDS change and of a
// route change (from the change to each proxy receiving it: p50, p99, max),
// the bytes each proxy received per change, the server's CPU seconds per
// change, its resident memory per connected proxy, and a reconnect of all N
// at once.
//
//	go run ./bench/fleet -tier direct,relay -impl pylon-api -n 10000 -streams-per-conn 100
//
// measures the same behind the relay tier too: the fleet connects to a
// `pylon relay` in its own process, fed by -impl's daemon, where the
// changes are made; the table adds each process's CPU and memory and the
// upstream streams the relay holds (relaytier.go).
//
//	go run ./bench/fleet -failover [-delta] -n 5000 -clusters 100
//
// measures instead a failover: two servers A and B serve the same world,
// the proxies reach their config on A, A is killed with SIGKILL and they
// move to B, presenting what they hold (-present yes) or not (no, the
// baseline); B reports when each proxy is SYNCED again and what it sent
// (failover.go, syncwatch.go).
//
//	go run ./bench/fleet -churn 10,100,1000 -n 5000 -clusters 1000 [-via api,file] [-delta] [-duration 1m]
//
// measures sustained endpoint churn instead: changes at each rate for the
// duration, through the admin API or the config file (Pylon's whole
// daemon) and into go-control-plane's cache; a change has converged when
// every proxy subscribed to its service holds it (churn.go). With -via
// kube the services are Kubernetes Services and EndpointSlices on a real
// kube-apiserver the driver starts, and a change is a slice's update
// (churnkube.go).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	serveImpl := flag.String("serve", "", "internal: run this server (pylon or gcp) instead of the driver")
	ns := flag.String("n", "1000", "proxy counts, comma-separated")
	cs := flag.String("clusters", "100", "cluster counts, comma-separated")
	impls := flag.String("impl", "pylon,gcp", "servers to measure: pylon, gcp, and (not with -churn or -failover) pylon-unobserved, Pylon without status tracking and metrics, a diagnostic of what they cost, and pylon-api and pylon-file, the whole daemon changed through the admin API or its config file written in place (daemonfleet.go); NAME@PATH (fleet scenario, -ab and, for pylon, -churn) is NAME as another build of this benchmark at PATH serves it")
	delta := flag.Bool("delta", false, "simulated Envoys speak delta xDS, to go-control-plane's delta server too (its snapshot cache), but with -failover to Pylon only; each row names the variant its server ran")
	perConn := flag.Int("streams-per-conn", 200, "streams multiplexed on one gRPC connection")
	profile := flag.String("profile", "", "write the servers' heap profile (after the first full config) and CPU profiles (the first 3s of the first full config, 3s around the EDS change, the route changes, the first 10s of the reconnect; with -failover, B's first 3s after the kill) into this folder")
	watch := flag.Bool("watch", false, "internal: with -serve, report when each proxy is SYNCED (the failover scenario)")
	failover := flag.Bool("failover", false, "measure a failover instead: the proxies reach their config on server A, A is killed (SIGKILL) and they move to B")
	present := flag.String("present", "yes,no", "with -failover: whether reconnecting proxies present what they hold (yes), or not (no: the baseline), or both")
	churnRates := flag.String("churn", "", "measure sustained endpoint churn instead, at these rates (changes per second, comma-separated, e.g. 10,100,1000): see churn.go")
	via := flag.String("via", "api,file", "with -churn: how changes reach Pylon: api (registrations and deregistrations through the admin API, embedded store), file (the config file rewritten and renamed into place) and/or kube (EndpointSlices updated on a kube-apiserver the driver starts, from .ci/kube-apiserver.sh's cache or $PYLON_KUBE_APISERVER, over Debian's etcd; Pylon watches them with --kubeconfig); go-control-plane takes them into its snapshot cache")
	duration := flag.Duration("duration", time.Minute, "with -churn: how long changes are issued at each rate (then at most 30s more for the last to converge)")
	subs := flag.Int("subs", 10, "with -churn: services each proxy subscribes to over EDS (all proxies get every Cluster; below -clusters, unlike Envoy, which asks for every EDS cluster's assignment, so Pylon holds the route table back until its hold timeout, 15s: at the cold start in SotW, once more after it in delta)")
	dir := flag.String("dir", "", "internal: the churn server's folder (store or config file)")
	driverProfile := flag.String("driver-profile", "", "write the driver's own CPU profile (the simulated proxies, the churn's clients) to this file")
	routes := flag.Int("routes", 1, "route changes measured one after another (the median last-proxy time and the mean CPU are shown; with -profile, one CPU profile spans them all)")
	eds := flag.Int("eds", 1, "EDS changes measured one after another (the latency percentiles are over every proxy of every change, the bytes and CPU a mean per change; with -profile, one CPU profile spans them all)")
	ab := flag.Bool("ab", false, "measure instead the server CPU of -eds EDS changes (at least 2) on the two servers of -impl (e.g. pylon-unobserved,pylon), in one run, both fleets connected and the changes alternating between them: a difference of a few percent, which the machine's drift hides between runs (see ab.go)")
	writeConfig := flag.Int("write-config", 0, "write the fleet world's config file (pylon-file's) with this many clusters to stdout and exit: a big config for measuring what parsing it costs `pylon serve` (docs/benchmarks-log.md)")
	tier := flag.String("tier", "direct", "the fleet scenario's tiers, comma-separated: direct (the proxies connect to -impl) and relay (to a `pylon relay` in its own process fed by -impl, which must be pylon-file or pylon-api: relaytier.go); with relay, each row is the tier table's")
	upstream := flag.String("upstream", "", "internal: with -serve relay, the relay's upstream xDS address")
	driverGC := flag.Int("driver-gogc", 400, "the driver's GOGC (the servers run with Go's default): the simulated proxies stand in for processes on other machines, and their garbage collection shares the 2 cores with the server measured")
	flag.Parse()
	if msg := checkFlags(*routes, *eds, *driverGC, *impls, *churnRates != "" || *failover, *duration); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(2)
	}
	if msg := checkTier(*tier, *impls, *churnRates != "" || *failover || *ab); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(2)
	}
	if *writeConfig > 0 {
		if _, err := os.Stdout.Write(mustFleetDoc(min(*writeConfig, 1<<16), 0, 0)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *serveImpl == "" {
		debug.SetGCPercent(*driverGC)
	}
	if *driverProfile != "" && *serveImpl == "" {
		stop, err := profileSelf(*driverProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer stop()
	}
	if *serveImpl != "" {
		c, _ := strconv.Atoi(*cs)
		if err := serveChild(*serveImpl, c, *dir, *watch, *upstream); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *ab {
		if msg := checkAB(*impls, *eds, *churnRates != "" || *failover); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
			os.Exit(2)
		}
		measureAB(*ns, *cs, *impls, *delta, *perConn, *eds, *profile)
		return
	}
	if *churnRates != "" {
		measureChurn(*ns, *churnRates, *impls, *via, churnCase{
			clusters: ints(*cs)[0], subs: *subs, duration: *duration, delta: *delta, perConn: *perConn, profile: *profile,
		})
		return
	}
	if *failover {
		for _, pr := range strings.Split(*present, ",") {
			if pr != "yes" && pr != "no" {
				fmt.Fprintf(os.Stderr, "-present: %q is neither yes nor no\n", pr)
				os.Exit(2)
			}
		}
		measureFailover(*ns, *cs, *impls, *present, failoverCase{delta: *delta, perConn: *perConn, profile: *profile})
		return
	}
	if *tier != "direct" {
		measureTiers(*ns, *cs, *impls, *tier, *delta, *perConn, changes{eds: *eds, routes: *routes}, *profile)
		return
	}
	fmt.Printf("| server | N | clusters | first full config (CPU server / proxies) | EDS change p50 / p99 / max | bytes per proxy per EDS change | server CPU per EDS change | route change max (CPU server / proxies) | RSS per proxy (idle / after GC) | reconnect of all N (max wait; CPU server / proxies, of it system) |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range ints(*cs) {
		for _, n := range ints(*ns) {
			for _, impl := range strings.Split(*impls, ",") {
				r, err := run(impl, n, c, speaksDelta(impl, *delta, false), *perConn, changes{eds: *eds, routes: *routes}, *profile)
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d: %v\n", impl, n, c, err)
					continue
				}
				fmt.Println(r)
			}
		}
	}
}

// checkFlags says what is wrong with the driver's flags, "" if nothing.
func checkFlags(routes, eds, driverGC int, impls string, scenario bool, duration time.Duration) string {
	switch {
	case routes < 1 || routes > 1000:
		return "-routes: between 1 and 1000"
	case eds < 1 || eds > 1000:
		return "-eds: between 1 and 1000"
	case driverGC < 10:
		return "-driver-gogc: at least 10 (the driver's collector cannot be turned off: the simulator would grow without bound)"
	case scenario && strings.Contains(impls, "pylon-unobserved"):
		return "-impl pylon-unobserved: only in the fleet scenario, not with -churn or -failover"
	case scenario && (strings.Contains(impls, "pylon-api") || strings.Contains(impls, "pylon-file")):
		return "-impl pylon-api, pylon-file: only in the fleet scenario (with -churn, say -impl pylon -via api,file)"
	case duration <= 0 || duration > time.Hour:
		return "-duration: between 1s and 1h"
	}
	return ""
}

// serveChild runs impl as the driver's child until killed.
func serveChild(impl string, clusters int, dir string, watch bool, upstream string) error {
	switch impl {
	case "relay":
		return serveRelay(dir, upstream)
	case "pylon-api", "pylon-file", "pylon-kube":
		return serveDaemon(impl, clusters, dir)
	case "gcp-churn":
		return serveGCPChurn(clusters)
	}
	return serve(impl, clusters, watch)
}

// measureFailover prints the failover table: a row per cluster count,
// proxy count, server and choice of presenting what the proxies hold; fc
// has the options common to every row.
func measureFailover(ns, cs, impls, present string, fc failoverCase) {
	fmt.Println(failoverHeader)
	for _, c := range ints(cs) {
		for _, n := range ints(ns) {
			for _, impl := range strings.Split(impls, ",") {
				for _, pr := range strings.Split(present, ",") {
					row := fc
					row.impl, row.n, row.clusters, row.present = impl, n, c, pr == "yes"
					row.delta = speaksDelta(impl, fc.delta, true)
					r, err := failover(row)
					if err != nil {
						fmt.Fprintf(os.Stderr, "failover %s n=%d clusters=%d present=%s: %v\n", impl, n, c, pr, err)
						continue
					}
					fmt.Println(r)
				}
			}
		}
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err == nil {
			out = append(out, v)
		}
	}
	return out
}

// child is a server process.
type child struct {
	cmd      *exec.Cmd
	xds, ctl string
	pprof    string // the daemon child's pprof address, when not ctl
	once     sync.Once
	// change, when set, makes set's changes instead of the control
	// endpoint (a daemon child: daemonfleet.go); cleanup, when set,
	// runs after stop.
	change  func(eds, route int) error
	cleanup func()
	// upstream, when set, is the server this child (a relay) is fed by
	// (relaytier.go): the changes are made there.
	upstream *child
}

// startChild starts a server process; extra are more flags for it. An
// impl of NAME@PATH is NAME as the fleet binary at PATH serves it: another
// build of this benchmark, to compare two builds of Pylon (with -ab).
func startChild(impl string, clusters int, extra ...string) (*child, error) {
	bin := os.Args[0]
	if name, path, ok := strings.Cut(impl, "@"); ok {
		impl, bin = name, path
	}
	cmd := exec.Command(bin, append([]string{"-serve", impl, "-clusters", strconv.Itoa(clusters)}, extra...)...)
	cmd.Stderr = os.Stderr
	// A driver that dies (a panic, a timeout's signal) takes its servers
	// with it rather than leaving them to hold the terminal's pipes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("server did not start: %w", err)
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		cmd.Process.Kill()
		return nil, fmt.Errorf("server did not start: %q", line)
	}
	c := &child{cmd: cmd, xds: f[0], ctl: f[1]}
	if len(f) > 2 {
		c.pprof = f[2]
	}
	return c, nil
}

// stop kills the process with SIGKILL (once) and reaps it.
func (c *child) stop() {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		if c.cleanup != nil {
			c.cleanup()
		}
	})
}

// cpu is the child's user+system CPU seconds so far.
func (c *child) cpu() float64 { return procCPU(strconv.Itoa(c.cmd.Process.Pid)) }

// procCPU is a process's user+system CPU seconds so far ("self": this
// one), at Linux's 100 ticks a second.
func procCPU(pid string) float64 {
	u, s := procUserSys(pid)
	return u + s
}

// procUserSys is a process's user and system CPU seconds so far.
func procUserSys(pid string) (user, sys float64) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return u / 100, s / 100
}

// rss is the child's resident memory in bytes.
func (c *child) rss() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb * 1024
		}
	}
	return 0
}

func (c *child) set(eds, route int) error {
	if c.change != nil {
		return c.change(eds, route)
	}
	_, err := c.post(fmt.Sprintf("/set?eds=%d&route=%d", eds, route))
	return err
}

// post calls the child's control endpoint and returns what it answered.
func (c *child) post(path string) (string, error) {
	resp, err := http.Post("http://"+c.debugAddr()+path, "", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func waitFor(counter *atomic.Int64, want int64, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for counter.Load() < want {
		if time.Since(start) > limit {
			return 0, fmt.Errorf("timed out at %d of %d", counter.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start), nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// fetch saves a profile from the server's control address.
func fetch(c *child, path, file string) {
	resp, err := http.Get("http://" + c.debugAddr() + path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	out, err := os.Create(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer out.Close()
	_, _ = io.Copy(out, resp.Body)
}

// profileSelf writes this process's CPU profile to path until stop.
func profileSelf(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// result is what one run of the fleet scenario measured.
type result struct {
	first, routeMax, reconnect time.Duration
	rssPer, rssGC              float64 // bytes per proxy, idle and after a GC
	lat                        []time.Duration
	bytesPer, cpu              float64 // per EDS change
	cpuRoute, selfRoute        float64 // route change: server's and proxies' CPU
	cpuRe, selfRe              float64 // reconnect: server's and proxies' CPU
	sysRe, selfSysRe           float64 // of it, in the kernel (faulting memory in, among others)
	endedRe                    string  // reconnect: streams ended and retried (ended), CPU not the run's (elsewhere)
	cpuFirst, selfFirst        float64 // first full config: server's and proxies' CPU
	routeLat                   []time.Duration
	rssAll, bytesRe            float64 // server RSS after GC; reconnect bytes per proxy
	bytesFirst                 float64 // first full config, bytes per proxy
	load                       string  // uptime's load averages at the first full config
	// up is the upstream's share, when the server measured is a relay
	// (relaytier.go).
	up upstreamResult
}

// changes are how many EDS and route changes a run measures.
type changes struct{ eds, routes int }

func run(impl string, n, clusters int, delta bool, perConn int, ch changes, profile string) (string, error) {
	return runTier(impl, n, clusters, delta, perConn, ch, profile, "")
}

// runTier is run with tier "" (the fleet table's row), "direct" or
// "relay" (the tier table's, relaytier.go: in the relay tier the fleet
// connects to a relay in front of impl's daemon).
func runTier(impl string, n, clusters int, delta bool, perConn int, ch changes, profile, tier string) (string, error) {
	c, err := startTier(impl, clusters, tier)
	if err != nil {
		return "", err
	}
	defer c.stop()
	f := newFleet(n, clusters, delta, perConn)
	if err := f.dial(c.xds); err != nil {
		return "", err
	}
	defer f.close()
	var r result
	var profiled sync.WaitGroup
	base := fmt.Sprintf("%s/%s-%d-%d", profile, impl, n, clusters)
	if delta {
		base += "-delta"
	}
	if tier == "relay" {
		base += "-relay" // the relay's profiles; the upstream's are not taken
	}
	if profile != "" {
		profiled.Add(1)
		go func() { defer profiled.Done(); fetch(c, "/debug/pprof/profile?seconds=3", base+".first.cpu") }()
		time.Sleep(100 * time.Millisecond)
	}
	up0 := c.upstreamCPU()
	err = firstConfig(c, f, &r, impl, profile != "")
	profiled.Wait()
	if err != nil {
		return "", err
	}
	r.up.cpuFirst = c.upstreamCPU() - up0
	readUpstream(c, &r)
	if profile != "" {
		fetch(c, "/debug/pprof/heap", base+".heap")
		profiled.Add(1)
		go func() {
			defer profiled.Done()
			fetch(c, "/debug/pprof/profile?seconds="+strconv.Itoa(3+ch.eds/3), base+".cpu")
		}()
		time.Sleep(100 * time.Millisecond)
	}
	err = edsChanges(c, f, &r, ch.eds)
	profiled.Wait()
	if err != nil {
		return "", err
	}
	if profile != "" {
		profiled.Add(1)
		go func() {
			defer profiled.Done()
			fetch(c, "/debug/pprof/profile?seconds="+strconv.Itoa(1+ch.routes/3), base+".route.cpu")
		}()
		time.Sleep(100 * time.Millisecond)
	}
	err = routeChanges(c, f, &r, ch)
	profiled.Wait()
	if err != nil {
		return "", err
	}
	if seesReconnect(impl, delta) {
		if profile != "" {
			profiled.Add(1)
			go func() { defer profiled.Done(); fetch(c, "/debug/pprof/profile?seconds=10", base+".reconnect.cpu") }()
		}
		err = reconnectAll(c, f, &r)
		profiled.Wait()
		if err != nil {
			return "", err
		}
	}
	if e := f.failures(); e != "" {
		fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d: %s\n", impl, n, clusters, e)
	}
	if r := f.retries.Load(); r > 0 {
		fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d: %d streams ended by the server and retried\n", impl, n, clusters, r)
	}
	if tier != "" {
		return tierRow(impl, n, delta, &r, f, tier == "relay", r.load), nil
	}
	return fleetRow(impl, n, clusters, delta, &r, f), nil
}

// seesReconnect says whether the driver can tell when a reconnect of
// impl's fleet is done: every proxy has a response of each type on its
// new stream. go-control-plane's delta server answers a stream that
// presents the versions it holds of named resources (EDS, RDS) with
// nothing at all, correctly, so the end of its delta reconnect is not
// seen; Pylon answers each type (with an empty response, if need be).
func seesReconnect(impl string, delta bool) bool {
	return !delta || strings.HasPrefix(impl, "pylon")
}

// fleetRow is the fleet table's row of what one run measured.
func fleetRow(impl string, n, clusters int, delta bool, r *result, f *fleet) string {
	mode := "SotW"
	if delta {
		mode = "delta"
	}
	reconnect := "not measured: go-control-plane's delta server answers a stream presenting current versions of named resources with nothing"
	if seesReconnect(impl, delta) {
		reconnect = fmt.Sprintf("%s (%s; %.1f / %.1f s, system %.1f / %.1f s%s)", ms(r.reconnect), ms(time.Duration(f.waitMax.Load())),
			r.cpuRe, r.selfRe, r.sysRe, r.selfSysRe, r.endedRe)
	}
	return fmt.Sprintf("| %s (%s) | %d | %d | %s (%.1f / %.1f s) | %s / %s / %s | %.0f B | %.3f s | %s (%.3f / %.3f s) | %.1f / %.1f KB | %s |",
		impl, mode, n, clusters, ms(r.first), r.cpuFirst, r.selfFirst,
		ms(percentile(r.lat, 0.5)), ms(percentile(r.lat, 0.99)), ms(percentile(r.lat, 1)),
		r.bytesPer, r.cpu, ms(r.routeMax), r.cpuRoute, r.selfRoute, r.rssPer/1024, r.rssGC/1024, reconnect)
}

// firstConfig opens the fleet and measures the time until every proxy has
// its full config, and the server's memory per proxy then.
func firstConfig(c *child, f *fleet, r *result, impl string, verbose bool) error {
	rss0 := c.rss()
	start := time.Now()
	cpu0, self0 := c.cpu(), procCPU("self")
	f.open(nil)
	if _, err := waitFor(&f.ready, int64(f.n), 10*time.Minute); err != nil {
		return fmt.Errorf("first config: %w", err)
	}
	r.first = time.Since(start)
	r.cpuFirst, r.selfFirst = c.cpu()-cpu0, procCPU("self")-self0
	r.bytesFirst = float64(f.bytes.Load()) / float64(f.n)
	time.Sleep(500 * time.Millisecond) // let ACKs settle
	r.rssPer = (c.rss() - rss0) / float64(f.n)
	mem, err := c.post("/gc")
	if err != nil {
		return err
	}
	if verbose {
		fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d after GC: %s\n", impl, f.n, f.clusters, mem)
	}
	r.rssAll = c.rss()
	r.rssGC = (r.rssAll - rss0) / float64(f.n)
	r.load = loadAvg()
	// The server's whole RSS, which the table shows only per proxy: the
	// fleet's bound (issue 36: under 2 GiB at 100,000) is on the whole.
	fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d: server RSS %.0f MiB before the fleet, %.0f MiB after a GC with it connected (load %s)\n",
		impl, f.n, f.clusters, rss0/(1<<20), c.rss()/(1<<20), loadAvg())
	return nil
}

// edsChanges measures EDS changes (one endpoint of one cluster each)
// reaching every proxy, one after another: the latency of every proxy of
// every change, and the mean bytes and CPU per change.
func edsChanges(c *child, f *fleet, r *result, count int) error {
	f.bytes.Store(0)
	f.mu.Lock()
	f.lat = nil
	f.mu.Unlock()
	ub0 := c.upstreamBytes()
	cpu0, up0 := c.cpu(), c.upstreamCPU()
	for i := 1; i <= count; i++ {
		f.edsSeen.Store(0)
		f.started = time.Now()
		f.epoch.Add(1)
		if err := c.set(i, 0); err != nil {
			return err
		}
		if _, err := waitFor(&f.edsSeen, int64(f.n), 5*time.Minute); err != nil {
			return fmt.Errorf("EDS change %d: %w", i, err)
		}
		time.Sleep(200 * time.Millisecond) // ACKs in
	}
	r.cpu = (c.cpu() - cpu0) / float64(count)
	r.up.cpu = (c.upstreamCPU() - up0) / float64(count)
	r.up.bytes = (c.upstreamBytes() - ub0) / float64(count)
	r.bytesPer = float64(f.bytes.Load()) / float64(f.n) / float64(count)
	f.mu.Lock()
	r.lat = append([]time.Duration(nil), f.lat...)
	f.mu.Unlock()
	return nil
}

// routeChanges measures route changes reaching every proxy, one after
// another: the median time to the last proxy and the mean CPU per change.
func routeChanges(c *child, f *fleet, r *result, ch changes) error {
	count := ch.routes
	maxes := make([]time.Duration, 0, count)
	f.mu.Lock()
	f.rlat = nil
	f.mu.Unlock()
	ub0 := c.upstreamBytes()
	cpu0, self0, up0 := c.cpu(), procCPU("self"), c.upstreamCPU()
	for i := 1; i <= count; i++ {
		f.epoch.Add(1)
		f.rdsSeen.Store(0)
		routeStart := time.Now()
		f.started = routeStart
		if err := c.set(ch.eds, i); err != nil { // the endpoints as the last EDS change left them
			return err
		}
		if _, err := waitFor(&f.rdsSeen, int64(f.n), 5*time.Minute); err != nil {
			return fmt.Errorf("route change %d: %w", i, err)
		}
		maxes = append(maxes, time.Since(routeStart))
		time.Sleep(200 * time.Millisecond) // ACKs in
	}
	r.routeMax = percentile(maxes, 0.5)
	r.cpuRoute, r.selfRoute = (c.cpu()-cpu0)/float64(count), (procCPU("self")-self0)/float64(count)
	r.up.cpuRoute = (c.upstreamCPU() - up0) / float64(count)
	r.up.bytesRoute = (c.upstreamBytes() - ub0) / float64(count)
	f.mu.Lock()
	r.routeLat = append([]time.Duration(nil), f.rlat...)
	f.mu.Unlock()
	return nil
}

// reconnectAll ends every proxy and starts them again at once, as after a
// restart of the proxies' side: new processes that keep what they hold
// (delta versions; a SotW proxy here starts without versions).
func reconnectAll(c *child, f *fleet, r *result) error {
	if err := f.stop(); err != nil {
		return err
	}
	f.ready.Store(0)
	f.waitMax.Store(0)
	refused, retries := refusals(c), f.retries.Load()
	f.bytes.Store(0)
	start := time.Now()
	cpu0, self0, up0 := c.cpu(), procCPU("self"), c.upstreamCPU()
	_, sys0 := procUserSys(strconv.Itoa(c.cmd.Process.Pid))
	_, selfSys0 := procUserSys("self")
	m0 := readMachine()
	f.open(f.proxies)
	if _, err := waitFor(&f.ready, int64(f.n), 10*time.Minute); err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	r.reconnect = time.Since(start)
	r.cpuRe, r.selfRe = c.cpu()-cpu0, procCPU("self")-self0
	r.up.cpuRe, r.bytesRe = c.upstreamCPU()-up0, float64(f.bytes.Load())/float64(f.n)
	_, sys1 := procUserSys(strconv.Itoa(c.cmd.Process.Pid))
	_, selfSys1 := procUserSys("self")
	r.sysRe, r.selfSysRe = sys1-sys0, selfSys1-selfSys0
	// The machine is read with the two processes, before the scrape of
	// the server's refusals, whose CPU would read as another process's.
	m1 := readMachine()
	r.endedRe = ended(f.retries.Load()-retries, refused, refusals(c)) + elsewhere(m0, m1, r.cpuRe+r.selfRe)
	return f.stop()
}
