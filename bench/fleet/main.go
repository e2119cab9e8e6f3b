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
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

func main() {
	serveImpl := flag.String("serve", "", "internal: run this server (pylon or gcp) instead of the driver")
	ns := flag.String("n", "1000", "proxy counts, comma-separated")
	cs := flag.String("clusters", "100", "cluster counts, comma-separated")
	impls := flag.String("impl", "pylon,gcp", "servers to measure")
	delta := flag.Bool("delta", false, "simulated Envoys speak delta xDS (go-control-plane is measured in SotW only)")
	perConn := flag.Int("streams-per-conn", 200, "streams multiplexed on one gRPC connection")
	profile := flag.String("profile", "", "write the servers' heap profile (after the first full config) and CPU profiles (3s around the EDS change, the first 10s of the reconnect) into this folder")
	flag.Parse()
	if *serveImpl != "" {
		c, _ := strconv.Atoi(*cs)
		if err := serve(*serveImpl, c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("| server | N | clusters | first full config | EDS change p50 / p99 / max | bytes per proxy per EDS change | server CPU per EDS change | route change max | RSS per proxy (idle / after GC) | reconnect of all N (max wait; CPU server / proxies) |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range ints(*cs) {
		for _, n := range ints(*ns) {
			for _, impl := range strings.Split(*impls, ",") {
				r, err := run(impl, n, c, *delta && impl == "pylon", *perConn, *profile)
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d: %v\n", impl, n, c, err)
					continue
				}
				fmt.Println(r)
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
}

func startChild(impl string, clusters int) (*child, error) {
	cmd := exec.Command(os.Args[0], "-serve", impl, "-clusters", strconv.Itoa(clusters))
	cmd.Stderr = os.Stderr
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
	return &child{cmd: cmd, xds: f[0], ctl: f[1]}, nil
}

func (c *child) stop() { c.cmd.Process.Kill(); c.cmd.Wait() }

// cpu is the child's user+system CPU seconds so far.
func (c *child) cpu() float64 { return procCPU(strconv.Itoa(c.cmd.Process.Pid)) }

// procCPU is a process's user+system CPU seconds so far ("self": this
// one), at Linux's 100 ticks a second.
func procCPU(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
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
	_, err := c.post(fmt.Sprintf("/set?eds=%d&route=%d", eds, route))
	return err
}

// post calls the child's control endpoint and returns what it answered.
func (c *child) post(path string) (string, error) {
	resp, err := http.Post("http://"+c.ctl+path, "", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// fleet is the simulated proxies and what they have seen.
type fleet struct {
	n, clusters int
	delta       bool
	names       []string
	conns       []*grpc.ClientConn
	proxies     []*proxy

	ready   atomic.Int64 // proxies with a full config
	epoch   atomic.Int64 // the change being measured
	edsSeen atomic.Int64 // proxies that got the change's EDS response
	rdsSeen atomic.Int64
	bytes   atomic.Int64
	mu      sync.Mutex
	lat     []time.Duration
	started time.Time
	waitMax atomic.Int64 // longest open-to-ready, ns
	retries atomic.Int64 // streams the server ended and the proxy retried
}

type proxy struct {
	f      *fleet
	id     int
	cs     grpc.ClientStream
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	// versions, in delta, is what the proxy holds per type and name: like
	// Envoy, it sends them as initial_resource_versions on reconnect.
	versions map[string]map[string]string
	have     int // bit per type
	sent     map[string]bool
	edsEpoch int64
	rdsEpoch int64
	opened   time.Time
}

const (
	hasCDS = 1 << iota
	hasEDS
	hasLDS
	hasRDS
)

func (f *fleet) open(addr string, perConn int) error {
	for len(f.conns)*perConn < f.n {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
		if err != nil {
			return err
		}
		f.conns = append(f.conns, conn)
	}
	f.proxies = make([]*proxy, f.n)
	var wg sync.WaitGroup
	errc := make(chan error, f.n)
	for i := range f.n {
		p := &proxy{f: f, id: i, done: make(chan struct{})}
		f.proxies[i] = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.run(f.conns[i/perConn]); err != nil {
				errc <- err
			}
		}()
	}
	go func() { wg.Wait(); close(errc) }()
	return nil
}

// run keeps the proxy connected until cancelled. Like Envoy, a stream the
// server ends (RESOURCE_EXHAUSTED from an admission bound, UNAVAILABLE) is
// retried after a jittered backoff; the wait counts from the first try.
func (p *proxy) run(conn *grpc.ClientConn) error {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.opened = time.Now()
	for try := 0; ; try++ {
		err := p.stream(ctx, conn)
		if ctx.Err() != nil {
			return nil
		}
		if c := status.Code(err); (c != codes.ResourceExhausted && c != codes.Unavailable) || try == 20 {
			return err
		}
		p.f.retries.Add(1)
		select {
		case <-time.After(250*time.Millisecond + time.Duration(rand.Int64N(int64(750*time.Millisecond)))):
		case <-ctx.Done():
			return nil
		}
	}
}

// stream runs one xDS stream until it fails.
func (p *proxy) stream(ctx context.Context, conn *grpc.ClientConn) error {
	method := "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	if p.f.delta {
		method = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	}
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	p.cs, p.have, p.sent = cs, 0, map[string]bool{}
	node := &corev3.Node{Id: fmt.Sprintf("envoy-%d", p.id), Cluster: "bench"}
	if p.f.delta {
		if p.versions == nil {
			p.versions = map[string]map[string]string{}
		}
		p.sendDelta(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: xdstype.ClusterURL, InitialResourceVersions: p.versions[xdstype.ClusterURL]})
		p.sendDelta(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.ListenerURL, InitialResourceVersions: p.versions[xdstype.ListenerURL]})
	} else {
		p.sendSotW(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: xdstype.ClusterURL})
		p.sendSotW(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.ListenerURL})
	}
	for {
		if p.f.delta {
			r := &discoveryv3.DeltaDiscoveryResponse{}
			if err := cs.RecvMsg(r); err != nil {
				return err
			}
			p.f.bytes.Add(int64(proto.Size(r)))
			held := p.versions[r.TypeUrl]
			if held == nil {
				held = map[string]string{}
				p.versions[r.TypeUrl] = held
			}
			for _, res := range r.Resources {
				held[res.Name] = res.Version
			}
			for _, n := range r.RemovedResources {
				delete(held, n)
			}
			p.onResponse(r.TypeUrl)
			p.sendDelta(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
			continue
		}
		r := &discoveryv3.DiscoveryResponse{}
		if err := cs.RecvMsg(r); err != nil {
			return err
		}
		p.f.bytes.Add(int64(proto.Size(r)))
		p.onResponse(r.TypeUrl)
		p.sendSotW(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo, ResourceNames: p.names(r.TypeUrl)})
	}
}

func (p *proxy) names(url string) []string {
	switch url {
	case xdstype.EndpointURL:
		return p.f.names
	case xdstype.RouteURL:
		return []string{"main"}
	}
	return nil
}

func (p *proxy) sendSotW(r *discoveryv3.DiscoveryRequest)       { _ = p.cs.SendMsg(r) }
func (p *proxy) sendDelta(r *discoveryv3.DeltaDiscoveryRequest) { _ = p.cs.SendMsg(r) }

// onResponse records what a proxy got, and subscribes like Envoy: EDS for
// its clusters after CDS, RDS for its listener's routes after LDS.
func (p *proxy) onResponse(url string) {
	f := p.f
	switch url {
	case xdstype.ClusterURL:
		p.have |= hasCDS
		if !p.sent["eds"] {
			p.sent["eds"] = true
			if f.delta {
				p.sendDelta(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNamesSubscribe: f.names, InitialResourceVersions: p.versions[xdstype.EndpointURL]})
			} else {
				p.sendSotW(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNames: f.names})
			}
		}
	case xdstype.ListenerURL:
		p.have |= hasLDS
		if !p.sent["rds"] {
			p.sent["rds"] = true
			if f.delta {
				p.sendDelta(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.RouteURL, ResourceNamesSubscribe: []string{"main"}, InitialResourceVersions: p.versions[xdstype.RouteURL]})
			} else {
				p.sendSotW(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.RouteURL, ResourceNames: []string{"main"}})
			}
		}
	case xdstype.EndpointURL:
		p.have |= hasEDS
		if e := f.epoch.Load(); p.edsEpoch < e && p.have == hasCDS|hasEDS|hasLDS|hasRDS {
			p.edsEpoch = e
			f.edsSeen.Add(1)
			f.mu.Lock()
			f.lat = append(f.lat, time.Since(f.started))
			f.mu.Unlock()
		}
	case xdstype.RouteURL:
		p.have |= hasRDS
		if e := f.epoch.Load(); p.rdsEpoch < e && p.have == hasCDS|hasEDS|hasLDS|hasRDS {
			p.rdsEpoch = e
			f.rdsSeen.Add(1)
		}
	}
	if p.have == hasCDS|hasEDS|hasLDS|hasRDS && !p.sent["ready"] {
		p.sent["ready"] = true
		p.edsEpoch, p.rdsEpoch = f.epoch.Load(), f.epoch.Load()
		f.ready.Add(1)
		if w := time.Since(p.opened).Nanoseconds(); w > f.waitMax.Load() {
			f.waitMax.Store(w)
		}
	}
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
	resp, err := http.Get("http://" + c.ctl + path)
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

func run(impl string, n, clusters int, delta bool, perConn int, profile string) (string, error) {
	c, err := startChild(impl, clusters)
	if err != nil {
		return "", err
	}
	defer c.stop()
	f := &fleet{n: n, clusters: clusters, delta: delta}
	for i := range clusters {
		f.names = append(f.names, clusterName(i))
	}
	rss0 := c.rss()
	start := time.Now()
	if err := f.open(c.xds, perConn); err != nil {
		return "", err
	}
	if _, err := waitFor(&f.ready, int64(n), 10*time.Minute); err != nil {
		return "", fmt.Errorf("first config: %w", err)
	}
	first := time.Since(start)
	time.Sleep(500 * time.Millisecond) // let ACKs settle
	rssPer := (c.rss() - rss0) / float64(n)
	mem, err := c.post("/gc")
	if err != nil {
		return "", err
	}
	if profile != "" {
		fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d after GC: %s\n", impl, n, clusters, mem)
	}
	rssGC := (c.rss() - rss0) / float64(n)
	var profiled sync.WaitGroup
	if profile != "" {
		base := fmt.Sprintf("%s/%s-%d-%d", profile, impl, n, clusters)
		fetch(c, "/debug/pprof/heap", base+".heap")
		profiled.Add(1)
		go func() { defer profiled.Done(); fetch(c, "/debug/pprof/profile?seconds=3", base+".cpu") }()
		time.Sleep(100 * time.Millisecond)
	}

	// An EDS change: one endpoint of one cluster.
	f.epoch.Add(1)
	f.bytes.Store(0)
	cpu0 := c.cpu()
	f.started = time.Now()
	if err := c.set(1, 0); err != nil {
		return "", err
	}
	if _, err := waitFor(&f.edsSeen, int64(n), 5*time.Minute); err != nil {
		return "", fmt.Errorf("EDS change: %w", err)
	}
	time.Sleep(200 * time.Millisecond) // ACKs in
	cpu := c.cpu() - cpu0
	profiled.Wait()
	bytesPer := float64(f.bytes.Load()) / float64(n)
	f.mu.Lock()
	lat := append([]time.Duration(nil), f.lat...)
	f.mu.Unlock()

	// A route change.
	f.epoch.Add(1)
	routeStart := time.Now()
	if err := c.set(1, 1); err != nil {
		return "", err
	}
	if _, err := waitFor(&f.rdsSeen, int64(n), 5*time.Minute); err != nil {
		return "", fmt.Errorf("route change: %w", err)
	}
	routeMax := time.Since(routeStart)

	// Everyone reconnects at once, keeping what they hold (which only a
	// delta client can tell the server).
	for _, p := range f.proxies {
		p.cancel()
	}
	for _, p := range f.proxies {
		<-p.done
	}
	f.ready.Store(0)
	f.waitMax.Store(0)
	reStart := time.Now()
	cpuRe0, self0 := c.cpu(), procCPU("self")
	if profile != "" {
		profiled.Add(1)
		go func() {
			defer profiled.Done()
			fetch(c, "/debug/pprof/profile?seconds=10", fmt.Sprintf("%s/%s-%d-%d.reconnect.cpu", profile, impl, n, clusters))
		}()
	}
	old := f.proxies
	f.proxies = make([]*proxy, len(old))
	for i := range old {
		p := &proxy{f: f, id: i, done: make(chan struct{}), versions: old[i].versions}
		f.proxies[i] = p
		go func() { _ = p.run(f.conns[i/perConn]) }()
	}
	if _, err := waitFor(&f.ready, int64(n), 10*time.Minute); err != nil {
		return "", fmt.Errorf("reconnect: %w", err)
	}
	re := time.Since(reStart)
	cpuRe, selfRe := c.cpu()-cpuRe0, procCPU("self")-self0
	profiled.Wait()
	for _, p := range f.proxies {
		p.cancel()
	}
	for _, conn := range f.conns {
		conn.Close()
	}
	if r := f.retries.Load(); r > 0 {
		fmt.Fprintf(os.Stderr, "%s n=%d clusters=%d: %d streams ended by the server and retried\n", impl, n, clusters, r)
	}
	mode := "SotW"
	if delta {
		mode = "delta"
	}
	return fmt.Sprintf("| %s (%s) | %d | %d | %s | %s / %s / %s | %.0f B | %.3f s | %s | %.1f / %.1f KB | %s (%s; %.1f / %.1f s) |",
		impl, mode, n, clusters, ms(first),
		ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), ms(percentile(lat, 1)),
		bytesPer, cpu, ms(routeMax), rssPer/1024, rssGC/1024, ms(re), ms(time.Duration(f.waitMax.Load())), cpuRe, selfRe), nil
}
