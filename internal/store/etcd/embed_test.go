package etcd

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// member is one embedded etcd server on loopback.
type member struct {
	name      string
	dir       string
	peer, cli string // host:port
	etcd      *embed.Etcd
	cluster   string
	tls       *transport.TLSInfo // clients must speak TLS (peers do not)
}

// freePorts returns n distinct loopback ports nothing listens on now.
// etcd needs its peer URLs before it starts (every member names the
// others), so ports cannot be left to the listener: they are held open
// together (so none is handed out twice) and closed just before etcd binds
// them, the usual small race.
func freePorts(t *testing.T, n int) []string {
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

// startCluster starts n members on loopback, each in its own t.TempDir,
// and waits until they serve. Heartbeat and election are short so that a
// test sees a new leader within a fraction of a second; the defaults
// (100ms, 1s) would only make the tests slower.
func startCluster(t *testing.T, n int) []*member {
	t.Helper()
	ms := make([]*member, n)
	var initial []string
	ports := freePorts(t, 2*n)
	for i := range ms {
		ms[i] = &member{name: fmt.Sprintf("m%d", i), dir: t.TempDir(), peer: ports[2*i], cli: ports[2*i+1]}
		initial = append(initial, ms[i].name+"=http://"+ms[i].peer)
	}
	for _, m := range ms {
		m.cluster = strings.Join(initial, ",")
	}
	// Members of a new cluster wait for each other: start them all, then
	// wait for each.
	for _, m := range ms {
		m.start(t, true)
	}
	for _, m := range ms {
		m.ready(t)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.stop()
		}
	})
	return ms
}

func (m *member) start(t *testing.T, fresh bool) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	pu := url.URL{Scheme: "http", Host: m.peer}
	cu := url.URL{Scheme: "http", Host: m.cli}
	if m.tls != nil {
		cu.Scheme = "https"
		cfg.ClientTLSInfo = *m.tls
	}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.InitialCluster = m.cluster
	cfg.InitialClusterToken = "pylon-test"
	cfg.ClusterState = embed.ClusterStateFlagNew
	if !fresh {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.TickMs, cfg.ElectionMs = 20, 200
	// The metrics listener and the v2 discovery are off by default; the
	// gRPC gateway is not needed.
	cfg.EnableGRPCGateway = false
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("starting etcd %s: %v", m.name, err)
	}
	m.etcd = e
}

// ready waits, bounded, until the member serves.
func (m *member) ready(t *testing.T) {
	t.Helper()
	select {
	case <-m.etcd.Server.ReadyNotify():
	case err := <-m.etcd.Err():
		t.Fatalf("etcd %s: %v", m.name, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("etcd %s not ready after 20s", m.name)
	}
}

// stop closes the member; a stopped member stays stopped.
func (m *member) stop() {
	if m.etcd != nil {
		m.etcd.Close()
		m.etcd = nil
	}
}

// kill stops the member as a crash would, as far as the cluster sees it:
// raft halts at once, without handing its leadership over (a graceful
// stop transfers it first, and the others never hold an election), then
// the listeners close.
func (m *member) kill() {
	if m.etcd != nil {
		m.etcd.Server.HardStop()
		m.etcd.Close()
		m.etcd = nil
	}
}

func endpoints(ms []*member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.cli)
	}
	return out
}

// waitFor polls cond until it holds or timeout passes: what is awaited
// (a lease expiring in etcd, a leader elected) has no event of its own to
// wait on from a client.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		<-tick.C
	}
}
