// Package etcdtest starts a real etcd (the embed package, in process, on
// loopback) for the tests of packages that run on the etcd store: one
// member that can be stopped and started again on the same data and ports,
// to test what a replica does while etcd is away. It is for tests only;
// nothing outside _test files imports it.
package etcdtest

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/pylon-xds/pylon/internal/store/etcd"
)

// readyTimeout bounds how long a member may take to serve.
const readyTimeout = 20 * time.Second

// Server is one embedded etcd member on loopback.
type Server struct {
	t            testing.TB
	dir          string
	peer, client string // host:port
	e            *embed.Etcd
}

// Start starts a single-member etcd in t.TempDir, waits until it serves,
// and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ports := freePorts(t, 2)
	s := &Server{t: t, dir: t.TempDir(), peer: ports[0], client: ports[1]}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// freePorts returns n distinct loopback ports nothing listens on now: held
// together so none is handed out twice, closed just before etcd binds them
// (the usual small race; etcd needs its URLs before it listens).
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

func (s *Server) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "m0"
	cfg.Dir = s.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	pu := url.URL{Scheme: "http", Host: s.peer}
	cu := url.URL{Scheme: "http", Host: s.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.InitialCluster = "m0=" + pu.String()
	cfg.InitialClusterToken = "pylon-etcdtest"
	// Short ticks: a restarted member elects itself within a fraction of
	// a second (the defaults would only make the tests slower).
	cfg.TickMs, cfg.ElectionMs = 20, 200
	cfg.EnableGRPCGateway = false
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatalf("starting etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		s.t.Fatalf("etcd: %v", err)
	case <-time.After(readyTimeout):
		e.Close()
		s.t.Fatalf("etcd not ready after %v", readyTimeout)
	}
	s.e = e
}

// Endpoint is the member's client address, host:port.
func (s *Server) Endpoint() string { return s.client }

// Stop stops the member (a no-op when stopped): its clients see etcd
// unreachable.
func (s *Server) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Restart starts a stopped member again on the same data and address, and
// waits until it serves.
func (s *Server) Restart() {
	s.t.Helper()
	if s.e == nil {
		s.start()
	}
}

// Open opens an etcd store on the member under prefix, with timeout per
// call (0: the store's default), closed when t ends.
func (s *Server) Open(t testing.TB, prefix string, timeout time.Duration) *etcd.Store {
	t.Helper()
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: []string{s.client}, Prefix: prefix, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
