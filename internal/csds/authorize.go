package csds

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/token"
)

// maxAuthValues bounds the authorization metadata values looked at: a
// caller cannot make the check cost more by sending many.
const maxAuthValues = 4

// TokenOrIdentity returns an Authorize that lets a call through when it
// carries "authorization: Bearer <token>" metadata with the admin read
// token (compared in constant time) over TLS or from a loopback address,
// or comes over a connection whose verified client certificate proves a
// name matching one of identities (path.Match globs, "*" stopping at "/",
// as group identities are written: "spiffe://example.org/ns/ops/sa/*").
//
// CSDS only reads, so the admin write token is never accepted (whoever
// holds it holds the read token too). A token is refused over plaintext from another host:
// it would cross the network in clear, to be replayed against the admin
// API. An empty read token and no identities match nothing: with none
// configured, every call is refused.
//
// Refusals are Unauthenticated when the caller proved nothing (no token,
// no certificate), presented a wrong token or presented one over
// plaintext from another host; PermissionDenied when its certificate's
// identity is not allowed. Messages never echo the token.
//
// current is asked for the read token on every call, so that a rotated token
// file takes effect (token.Files); nil is no token.
func TokenOrIdentity(current func() string, identities []string) func(ctx context.Context) error {
	ids := append([]string(nil), identities...)
	return func(ctx context.Context) error {
		var readToken string
		if current != nil {
			readToken = current()
		}
		if readToken == "" && len(ids) == 0 {
			return grpcstatus.Error(codes.PermissionDenied, "CSDS is disabled: configure an admin read token, or --csds-identity, to allow callers")
		}
		presented, ok := tokenOK(ctx, readToken)
		if ok && !tokenSafe(ctx) {
			return grpcstatus.Error(codes.Unauthenticated, "CSDS: a bearer token is accepted only over TLS or from a loopback address; this connection is plaintext from another host (use a client certificate matching --csds-identity, or serve xDS over TLS)")
		}
		if ok {
			return nil
		}
		id := identity.FromContext(ctx)
		if id.Verified() && nodegroup.AnyMatch(ids, id.Names()) {
			return nil
		}
		switch {
		case presented:
			return grpcstatus.Error(codes.Unauthenticated, "CSDS: the bearer token presented is not the admin read token")
		case id.Verified():
			return grpcstatus.Error(codes.PermissionDenied, fmt.Sprintf("CSDS: client certificate identity %s matches no --csds-identity pattern", id))
		}
		return grpcstatus.Error(codes.Unauthenticated, "CSDS needs \"authorization: Bearer <admin read token>\" metadata, or a client certificate whose identity matches --csds-identity")
	}
}

// tokenOK reports whether the call presented a bearer token, and whether
// one of the first few is the read token.
func tokenOK(ctx context.Context, readToken string) (presented, ok bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) > maxAuthValues {
		vals = vals[:maxAuthValues]
	}
	for _, v := range vals {
		got, isBearer := strings.CutPrefix(v, "Bearer ")
		if !isBearer {
			continue
		}
		presented = true
		if token.Equal(got, readToken) {
			ok = true
		}
	}
	return presented, ok
}

// tokenSafe reports whether a token sent on this connection was protected
// on the way: the connection is TLS, or it comes from a loopback address
// (the token never left the host). Anything else, including a peer with no
// address, is not.
func tokenSafe(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	switch p.AuthInfo.(type) {
	case credentials.TLSInfo, *credentials.TLSInfo:
		return true
	}
	return isLoopback(p.Addr)
}

// isLoopback reports whether addr is a TCP address on a loopback network.
func isLoopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	if addr == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
