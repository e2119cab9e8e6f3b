package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/store"
)

// unreachable is an error of an etcd that could not serve the call: it is
// store.ErrUnavailable and keeps its cause.
type unreachable struct {
	where, op string
	ambiguous bool // a write whose outcome is unknown
	err       error
}

func (e *unreachable) Error() string {
	msg := fmt.Sprintf("etcd unreachable at %s: %s: %v", e.where, e.op, e.err)
	if e.ambiguous {
		msg += " (the write may or may not have been applied: read the current revision before retrying)"
	}
	return msg
}

func (e *unreachable) Unwrap() []error { return []error{store.ErrUnavailable, e.err} }

// isUnavailable reports whether err says etcd could not serve a call, as
// opposed to refusing it.
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, clientv3.ErrNoAvailableEndpoints) {
		return true
	}
	code := codes.OK
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	case codes.ResourceExhausted: // out of space (alarm) or too many requests: refused for now
		return !tooLarge(err)
	}
	return false
}

// tooLarge reports whether err refuses a request for its size: etcd's
// --max-request-bytes, or the client's own send limit (gRPC says
// ResourceExhausted for both that and an etcd out of space).
func tooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

// fail turns an etcd error into the store's: unreachable (503), refused
// for its size (a clear message), or as it is. A caller's own cancellation
// stays context.Canceled.
func (s *Store) fail(op string, err error) error {
	return s.failWrite(op, err, false)
}

// splitAdvice says how to split a change too large for one transaction,
// an apply's or a prune's (whose deletions count too).
const splitAdvice = "split the change: apply fewer objects at once; for a prune, delete some of the objects it would delete first (pylon delete), or prune fewer kinds at a time"

// failWrite is fail for a write: when etcd may have applied it, the
// message says so.
func (s *Store) failWrite(op string, err error, write bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("etcd store at %s: %s: more operations in one transaction than etcd allows (its --max-txn-ops; this store was told %d): %s, or raise both: %w (%w)", s.where, op, s.maxOps, splitAdvice, err, store.ErrTooLarge)
	case tooLarge(err):
		return fmt.Errorf("etcd store at %s: %s: the request is larger than etcd accepts (its --max-request-bytes, 1.5 MiB by default; this client sends at most 2 MiB): %s, or with smaller objects: %w (%w)", s.where, op, splitAdvice, err, store.ErrTooLarge)
	case errors.Is(err, rpctypes.ErrNoSpace):
		return &unreachable{where: s.where, op: op + " (etcd is out of space and refuses writes until an operator compacts, defragments and disarms the NOSPACE alarm)", err: err}
	case isUnavailable(err):
		return &unreachable{where: s.where, op: op, ambiguous: write, err: err}
	}
	return fmt.Errorf("etcd store at %s: %s: %w", s.where, op, err)
}
