package csds

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/model"
)

// maxAuthValues bounds the authorization metadata values looked at: a
// caller cannot make the check cost more by sending many.
const maxAuthValues = 4

// TokenOrIdentity returns an Authorize that lets a call through when it
// carries "authorization: Bearer <token>" metadata with the admin read or
// write token (compared in constant time), or comes over a connection whose
// verified client certificate proves a name matching one of identities
// (path.Match globs, "*" stopping at "/", as group identities are written:
// "spiffe://example.org/ns/ops/sa/*"). Empty tokens and no identities match
// nothing: with none configured, every call is refused.
//
// Refusals are Unauthenticated when the caller proved nothing (no token,
// no certificate) or presented a wrong token, PermissionDenied when its
// certificate's identity is not allowed; messages never echo the token.
func TokenOrIdentity(readToken, writeToken string, identities []string) func(ctx context.Context) error {
	ids := append([]string(nil), identities...)
	return func(ctx context.Context) error {
		if readToken == "" && writeToken == "" && len(ids) == 0 {
			return grpcstatus.Error(codes.PermissionDenied, "CSDS is disabled: configure an admin read or write token, or --csds-identity, to allow callers")
		}
		presented, ok := tokenOK(ctx, readToken, writeToken)
		if ok {
			return nil
		}
		id := identity.FromContext(ctx)
		if id.Verified() && model.AnyMatch(ids, id.Names()) {
			return nil
		}
		switch {
		case presented:
			return grpcstatus.Error(codes.Unauthenticated, "CSDS: the bearer token presented is neither the admin read token nor the write token")
		case id.Verified():
			return grpcstatus.Error(codes.PermissionDenied, fmt.Sprintf("CSDS: client certificate identity %s matches no --csds-identity pattern", id))
		}
		return grpcstatus.Error(codes.Unauthenticated, "CSDS needs \"authorization: Bearer <admin read or write token>\" metadata, or a client certificate whose identity matches --csds-identity")
	}
}

// tokenOK reports whether the call presented a bearer token, and whether
// one of the first few matches a configured token. Both tokens are always
// compared, so the time taken says nothing of which one matched.
func tokenOK(ctx context.Context, readToken, writeToken string) (presented, ok bool) {
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
		r, w := sameToken(got, readToken), sameToken(got, writeToken)
		if r || w {
			ok = true
		}
	}
	return presented, ok
}

// sameToken compares in constant time, lengths included (both hashed). An
// empty configured token matches nothing.
func sameToken(got, want string) bool {
	if want == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
