// Package etcdtest starts a real etcd (the embed package, in process, on
// loopback) for the tests of packages that run on the etcd store: one
// member, or a cluster of several, that can be stopped, killed and started
// again on the same data and ports, to test what a replica does while etcd
// or its leader is away. It is for tests only; nothing outside _test files
// imports it.
package etcdtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/pylon-xds/pylon/internal/store/etcd"
)

// readyTimeout bounds how long a member may take to serve, and how long
// Leader waits for an election.
const readyTimeout = 20 * time.Second

// LeakOptions are the goleak options a package starting a cluster of
// several members needs: etcd's peer transport (rafthttp) leaves the
// keep-alive HTTP connections between the members of a stopped cluster
// open, the pooled client halves (persistConn's loops) and the server
// halves serving them. They are etcd's, between its own members; a package
// using them must close its own HTTP clients' idle connections itself,
// since these frames are then ignored for every HTTP connection.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	}
}

// Server is one embedded etcd member on loopback.
type Server struct {
	t            testing.TB
	name         string
	dir          string
	peer, client string // host:port
	// cluster is the initial cluster, "name=http://peer,...": every
	// member names all of them.
	cluster string
	e       *embed.Etcd
}

// Start starts a single-member etcd in t.TempDir, waits until it serves,
// and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartCluster(t, 1).Members[0]
}

// Cluster is several members of one etcd cluster on loopback.
type Cluster struct {
	t       testing.TB
	Members []*Server
}

// StartCluster starts n members on loopback, each in its own t.TempDir,
// waits until they all serve, and stops them when t ends. Heartbeat and
// election are short (20ms, 200ms), so that a new leader is elected within
// a fraction of a second of the old one's loss; the defaults (100ms, 1s)
// would only make the tests slower.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := FreePorts(t, 2*n)
	c := &Cluster{t: t, Members: make([]*Server, n)}
	var initial []string
	for i := range c.Members {
		s := &Server{t: t, name: fmt.Sprintf("m%d", i), dir: t.TempDir(), peer: ports[2*i], client: ports[2*i+1]}
		c.Members[i] = s
		initial = append(initial, s.name+"=http://"+s.peer)
	}
	for _, s := range c.Members {
		s.cluster = strings.Join(initial, ",")
	}
	t.Cleanup(func() {
		for _, s := range c.Members {
			s.Stop()
		}
	})
	// The members of a new cluster wait for each other before any
	// serves: launch them all, then wait for each.
	for _, s := range c.Members {
		s.launch()
	}
	for _, s := range c.Members {
		s.ready()
	}
	return c
}

// FreePorts returns n distinct loopback ports nothing listens on now: held
// together so none is handed out twice, closed just before etcd binds them
// (etcd needs its URLs before it listens). They are drawn below the
// kernel's ephemeral range: a port from there, closed, could be taken by
// any other test's listener on port 0 or outgoing connection before etcd
// binds it, which failed a member's start under a loaded CI run.
// Other helpers that must name a port before their server binds it (the
// kube-apiserver of source/kube/kubetest) use it too.
func FreePorts(t testing.TB, n int) []string {
	t.Helper()
	low := ephemeralLow()
	var out []string
	for tries := 0; len(out) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free loopback ports found in [%d, %d)", n, portsFrom, low)
		}
		port := portsFrom + rand.IntN(low-portsFrom)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

// portsFrom is where FreePorts draws from, up to the ephemeral range.
const portsFrom = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > portsFrom+1000 {
				low = v
			}
		}
	}
	return low
}

// launch starts the member without waiting for it to serve. On a data
// folder that already holds the member's log, etcd ignores the initial
// cluster and rejoins with what it logged: a restart is a launch too.
func (s *Server) launch() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = s.name
	cfg.Dir = s.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	pu := url.URL{Scheme: "http", Host: s.peer}
	cu := url.URL{Scheme: "http", Host: s.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.InitialCluster = s.cluster
	cfg.InitialClusterToken = "pylon-etcdtest"
	// Short ticks: a restarted member, or the survivors of a lost
	// leader, elect within a fraction of a second.
	cfg.TickMs, cfg.ElectionMs = 20, 200
	cfg.EnableGRPCGateway = false
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatalf("starting etcd %s: %v", s.name, err)
	}
	s.e = e
}

// ready waits, bounded, until the launched member serves.
func (s *Server) ready() {
	s.t.Helper()
	select {
	case <-s.e.Server.ReadyNotify():
	case err := <-s.e.Err():
		s.Stop()
		s.t.Fatalf("etcd %s: %v", s.name, err)
	case <-time.After(readyTimeout):
		s.Stop()
		s.t.Fatalf("etcd %s not ready after %v", s.name, readyTimeout)
	}
}

// Name is the member's name (m0, m1, ...).
func (s *Server) Name() string { return s.name }

// Endpoint is the member's client address, host:port.
func (s *Server) Endpoint() string { return s.client }

// Running reports whether the member is started (not stopped or killed).
func (s *Server) Running() bool { return s.e != nil }

// Stop stops the member (a no-op when stopped): its clients see etcd
// unreachable. A leader stopping this way hands its leadership over first.
func (s *Server) Stop() {
	if s.e == nil {
		return
	}
	// Bounded: etcd's Close waits for client servers that a member which
	// never served (its cluster never formed) never started, for ever.
	// That turned a failed start into a test binary's 10-minute timeout,
	// without the failure's message.
	e, closed := s.e, make(chan struct{})
	s.e = nil
	go func() {
		e.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeTimeout):
		s.t.Errorf("etcd %s did not close within %v (a member that never served cannot: its Close waits for servers it never started)", s.name, closeTimeout)
	}
}

// closeTimeout bounds Stop.
const closeTimeout = 30 * time.Second

// Kill stops the member as a crash would, as far as the cluster sees it:
// raft halts at once, without handing leadership over (Stop transfers it
// first, and the others never hold an election), then the listeners close.
func (s *Server) Kill() {
	if s.e != nil {
		s.e.Server.HardStop()
		s.e.Close()
		s.e = nil
	}
}

// Restart starts a stopped member again on the same data and address, and
// waits until it serves (in a cluster: until it has rejoined).
func (s *Server) Restart() {
	s.t.Helper()
	if s.e == nil {
		s.launch()
		s.ready()
	}
}

// isLeader reports whether the running member leads its cluster now.
func (s *Server) isLeader() bool {
	return s.e != nil && s.e.Server.Leader() == s.e.Server.MemberID()
}

// Open opens an etcd store on the member under prefix, with timeout per
// call (0: the store's default), closed when t ends.
func (s *Server) Open(t testing.TB, prefix string, timeout time.Duration) *etcd.Store {
	t.Helper()
	return open(t, []string{s.client}, prefix, timeout)
}

// Endpoints are every member's client address, running or not, as a
// replica is configured with them.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, s := range c.Members {
		out[i] = s.client
	}
	return out
}

// Leader returns the member that leads, once one does (an election after
// a leader's loss takes a few hundred milliseconds), within a bound.
func (c *Cluster) Leader() *Server {
	c.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, s := range c.Members {
			if s.isLeader() {
				return s
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no etcd leader within %v", readyTimeout)
		}
		<-tick.C
	}
}

// Open opens an etcd store on the cluster's running members under prefix,
// with timeout per call (0: the store's default), closed when t ends.
func (c *Cluster) Open(t testing.TB, prefix string, timeout time.Duration) *etcd.Store {
	t.Helper()
	var live []string
	for _, s := range c.Members {
		if s.Running() {
			live = append(live, s.client)
		}
	}
	return open(t, live, prefix, timeout)
}

func open(t testing.TB, endpoints []string, prefix string, timeout time.Duration) *etcd.Store {
	t.Helper()
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: endpoints, Prefix: prefix, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
