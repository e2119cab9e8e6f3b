package daemon

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpcCloseWait is how long grpc-go's server transport waits, once it
// decided to close a connection (the grace is over), for the client to
// close it first (internal/transport/http2_server.go, grpc-go#5358).
const grpcCloseWait = time.Second

// A maximum connection age set without a grace gets a finite one: gRPC's
// own default (forever) would keep every stream on its connection.
func TestMaxConnectionAgeGraceDefault(t *testing.T) {
	for _, c := range []struct{ age, grace, want time.Duration }{
		{-1, 0, 0},
		{time.Minute, 0, DefaultMaxConnectionAgeGrace},
		{time.Minute, 3 * time.Second, 3 * time.Second},
	} {
		o := Options{MaxConnectionAge: c.age, MaxConnectionAgeGrace: c.grace}
		o.defaults()
		if o.MaxConnectionAgeGrace != c.want {
			t.Errorf("age %v grace %v: grace %v, want %v", c.age, c.grace, o.MaxConnectionAgeGrace, c.want)
		}
	}
}

// Connections age out by default (issue 30, finding 5): after 30 minutes,
// with gRPC's ±10% jitter, so that a certificate revoked by other means
// than the client CA bundle, or a proxy pinned to one replica, does not
// stay connected for ever. A negative age is never; the grace follows the
// age.
func TestMaxConnectionAgeDefault(t *testing.T) {
	for _, c := range []struct{ age, wantAge, wantGrace time.Duration }{
		{0, 30 * time.Minute, DefaultMaxConnectionAgeGrace},
		{-1, -1, 0},
		{time.Hour, time.Hour, DefaultMaxConnectionAgeGrace},
	} {
		o := Options{MaxConnectionAge: c.age}
		o.defaults()
		if o.MaxConnectionAge != c.wantAge || o.MaxConnectionAgeGrace != c.wantGrace {
			t.Errorf("age %v: age %v grace %v, want %v and %v", c.age, o.MaxConnectionAge, o.MaxConnectionAgeGrace, c.wantAge, c.wantGrace)
		}
	}
}

// TestMaxConnectionAge: five proxies connecting together to a daemon with
// a 2s maximum connection age see their streams end (UNAVAILABLE, the
// connection closed after the grace) within age ±10% plus the grace and
// gRPC's close wait, not
// all at the same instant (gRPC's jitter); each opens a new stream, which
// goes over a new connection, and is SYNCED again.
func TestMaxConnectionAge(t *testing.T) {
	const n, age, grace = 5, 2 * time.Second, 300 * time.Millisecond
	r := startDaemon(t, Options{MaxConnectionAge: age, MaxConnectionAgeGrace: grace})
	ends := make(chan streamEnd, n)
	proxies := make([]*proxy, n)
	begun := time.Now()
	for i := range n {
		proxies[i] = connect(t, r.xdsAddr, "aged-"+string(rune('a'+i)))
	}
	synced := time.Now()
	for _, p := range proxies {
		p.watchEnd(age*2+grace+10*time.Second, ends)
	}
	got := collect(t, ends, n)
	t.Logf("connected within %v; streams ended after %v", synced.Sub(begun), offsets(got, begun))
	// Each connection was opened between begun and synced: its streams
	// end between 0.9*age+grace after begun and 1.1*age+grace+1s after
	// synced (gRPC then waits up to 1s for the client to close the
	// connection before closing it itself; plus a second of scheduling
	// slack on a loaded machine).
	earliest, latest := begun.Add(age*9/10+grace), synced.Add(age*11/10+grace+grpcCloseWait+time.Second)
	for _, e := range got {
		if e.at.Before(earliest) || e.at.After(latest) {
			t.Errorf("the stream of %s ended %v after the first connection, want within [%v, %v]",
				e.node, e.at.Sub(begun), earliest.Sub(begun), latest.Sub(begun))
		}
		if status.Code(e.err) != codes.Unavailable {
			t.Errorf("the stream of %s ended with %v, want UNAVAILABLE", e.node, e.err)
		}
	}
	// The jitter is uniform over ±10% (400ms here): five connections all
	// ending within 10ms of each other has a chance of about 5*(10/400)^4,
	// a few in a million; with no jitter they end within a few ms.
	if spread := got[n-1].at.Sub(got[0].at); spread < 10*time.Millisecond {
		t.Errorf("the five connections ended within %v of each other: no jitter", spread)
	}

	// Each reconnects: a new stream on a new connection, SYNCED again.
	for _, p := range proxies {
		p.open(t)
		if d := p.dialled(); len(d) != 2 || d[0] == d[1] {
			t.Errorf("%s dialled %v, want a second connection for its new stream", p.node, d)
		}
	}
	if !waitUntil(5*time.Second, func() bool { return allResynced(r.proxies(t), proxies) }) {
		t.Fatalf("the new streams are not all SYNCED on CDS: %+v", r.proxies(t))
	}
	if code, _ := r.readyz(t); code != http.StatusOK {
		t.Errorf("readyz %d: connection ageing is not a stop", code)
	}
}

// allResynced reports whether each proxy's stream on its second connection
// is SYNCED on CDS, as /proxies shows it.
func allResynced(streams []proxyStream, proxies []*proxy) bool {
	for _, p := range proxies {
		d := p.dialled()
		if len(d) < 2 {
			return false
		}
		i := slices.IndexFunc(streams, func(s proxyStream) bool { return s.Node == p.node && s.Address == d[1] })
		if i < 0 || !cdsSynced(streams[i]) {
			return false
		}
	}
	return true
}

// cdsSynced reports whether the stream's Clusters are SYNCED.
func cdsSynced(s proxyStream) bool {
	for _, ty := range s.Types {
		if ty.Type == "CDS" {
			return ty.State == "SYNCED"
		}
	}
	return false
}
