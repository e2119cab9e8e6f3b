package csds_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/csds"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// TestRefused: without the read token (or with a wrong one, or the write
// token) both
// methods are refused with a message saying what is needed, and nothing of
// the fleet is answered.
func TestRefused(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	cases := []struct {
		name, token, want string
	}{
		{"no token", "", "needs \"authorization: Bearer"},
		{"wrong token", "guess", "not the admin read token"},
		{"token prefix", readToken[:len(readToken)-1], "not the admin read token"},
		// CSDS only reads: the write token is not needed, so not taken.
		{"write token", writeToken, "not the admin read token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.token != "" {
				ctx = withToken(ctx, c.token)
			}
			resp, err := fetch(t, conn, ctx, &statusv3.ClientStatusRequest{})
			if grpcstatus.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), c.want) || resp != nil {
				t.Fatalf("Fetch: %v, %v; want Unauthenticated saying %q", resp, err, c.want)
			}
			if strings.Contains(err.Error(), c.token) && c.token != "" {
				t.Fatal("the refusal echoes the token")
			}
			sctx, cancel := context.WithTimeout(ctx, xdstest.Timeout)
			defer cancel()
			st, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).StreamClientStatus(sctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Send(&statusv3.ClientStatusRequest{})
			if _, err := st.Recv(); grpcstatus.Code(err) != codes.Unauthenticated {
				t.Fatalf("Stream: %v, want Unauthenticated", err)
			}
		})
	}
}

// TestDisabled: with no token and no identity configured, CSDS answers
// no one, even a caller presenting an empty bearer token.
func TestDisabled(t *testing.T) {
	e := start(t, csds.TokenOrIdentity(nil, nil), nil, csds.Options{})
	conn := xdstest.Dial(t, e.addr)
	_, err := fetch(t, conn, withToken(context.Background(), ""), &statusv3.ClientStatusRequest{})
	if grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "CSDS is disabled") {
		t.Fatalf("got %v, want PermissionDenied: disabled", err)
	}
}

// TestIdentity: over mTLS, a client certificate matching --csds-identity
// is let in without a token; another identity is PermissionDenied, naming
// it; no certificate and no token is Unauthenticated.
func TestIdentity(t *testing.T) {
	ca := identitytest.NewCA(t, "csds-ca")
	e := start(t, csds.TokenOrIdentity(fixed(readToken), []string{"spiffe://example.org/ns/ops/sa/*"}), ca.ServerConfig(t), csds.Options{})
	ops := ca.Issue(t, "spiffe://example.org/ns/ops/sa/grpcdebug")
	proxy := ca.Issue(t, "spiffe://example.org/ns/edge/sa/edge-1")

	if _, err := fetch(t, xdstest.DialTLS(t, e.addr, ca.ClientConfig(&ops)), context.Background(), &statusv3.ClientStatusRequest{}); err != nil {
		t.Fatalf("allowed identity refused: %v", err)
	}
	_, err := fetch(t, xdstest.DialTLS(t, e.addr, ca.ClientConfig(&proxy)), context.Background(), &statusv3.ClientStatusRequest{})
	if grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "spiffe://example.org/ns/edge/sa/edge-1") {
		t.Fatalf("other identity: %v, want PermissionDenied naming it", err)
	}
	_, err = fetch(t, xdstest.DialTLS(t, e.addr, ca.ClientConfig(nil)), context.Background(), &statusv3.ClientStatusRequest{})
	if grpcstatus.Code(err) != codes.Unauthenticated {
		t.Fatalf("no certificate: %v, want Unauthenticated", err)
	}
	// The token still works over TLS, whatever the certificate.
	if _, err := fetch(t, xdstest.DialTLS(t, e.addr, ca.ClientConfig(&proxy)), withToken(context.Background(), readToken), &statusv3.ClientStatusRequest{}); err != nil {
		t.Fatalf("read token over TLS refused: %v", err)
	}
}

// TestTokenOnlyOverTLSOrLoopback: the read token is taken over TLS or from
// a loopback address, never over plaintext from another host, where it
// crossed the network in clear. (Real gRPC connections can only come from
// loopback in tests, so the peer is set directly here; the loopback case
// over real gRPC is every other test.)
func TestTokenOnlyOverTLSOrLoopback(t *testing.T) {
	auth := csds.TokenOrIdentity(fixed(readToken), nil)
	call := func(addr net.Addr, ai credentials.AuthInfo) error {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+readToken))
		if addr != nil {
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: addr, AuthInfo: ai})
		}
		return auth(ctx)
	}
	remote := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 40000}
	tlsInfo := credentials.TLSInfo{State: tls.ConnectionState{}}
	for _, c := range []struct {
		name string
		addr net.Addr
		ai   credentials.AuthInfo
		ok   bool
	}{
		{"loopback v4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil, true},
		{"loopback v6", &net.TCPAddr{IP: net.IPv6loopback, Port: 1}, nil, true},
		{"remote over TLS", remote, tlsInfo, true},
		{"remote plaintext", remote, nil, false},
		{"v4-mapped remote plaintext", &net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 1}, nil, false},
		{"no peer", nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := call(c.addr, c.ai)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && (grpcstatus.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "only over TLS or from a loopback address") || strings.Contains(err.Error(), readToken)) {
				t.Fatalf("got %v, want Unauthenticated: only over TLS or from loopback", err)
			}
		})
	}
}

// syncBuffer is a log sink the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRefusalsLogBounded: a caller refused in a loop causes a handful of
// log lines, not one per call.
func TestRefusalsLogBounded(t *testing.T) {
	var logs syncBuffer
	e := start(t, tokens(), nil, csds.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	conn := xdstest.Dial(t, e.addr)
	const n = 40
	begin := time.Now()
	for range n {
		if _, err := fetch(t, conn, withToken(context.Background(), "guess"), &statusv3.ClientStatusRequest{}); grpcstatus.Code(err) != codes.Unauthenticated {
			t.Fatalf("got %v, want Unauthenticated", err)
		}
	}
	// A burst of 5, then one a second.
	most := 5 + int(time.Since(begin)/time.Second) + 1
	if got := strings.Count(logs.String(), "CSDS call refused"); got == 0 || got > most {
		t.Fatalf("%d refusals logged %d lines, want 1 to %d:\n%s", n, got, most, logs.String())
	}
}

// fixed is a read token that never rotates.
func fixed(tok string) func() string { return func() string { return tok } }
