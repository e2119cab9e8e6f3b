package csds_test

import (
	"context"
	"strings"
	"testing"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/csds"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// TestRefused: without the read or write token (or with a wrong one) both
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
		{"wrong token", "guess", "neither the admin read token nor the write token"},
		{"token prefix", readToken[:len(readToken)-1], "neither the admin read token"},
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
	e := start(t, csds.TokenOrIdentity("", "", nil), nil, csds.Options{})
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
	e := start(t, csds.TokenOrIdentity(readToken, "", []string{"spiffe://example.org/ns/ops/sa/*"}), ca.ServerConfig(t), csds.Options{})
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
