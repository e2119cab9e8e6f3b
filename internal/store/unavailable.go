package store

import "errors"

// ErrUnavailable is what a store returns when its backend cannot be
// reached (etcd down, no leader, a call past its deadline): the request
// was not served, and may be retried. The admin API answers 503 for it,
// not 500: nothing is wrong with the request. A write that fails so may
// or may not have been applied (etcd applies a transaction whole or not
// at all, but the answer can be lost); the error text says so, and a
// retry with the revision it read is safe.
var ErrUnavailable = errors.New("store unavailable")
