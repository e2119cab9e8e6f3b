package store

import "context"

// Watcher is a store that tells when its objects change: several replicas
// share one store (etcd), and each must learn of a write made through
// another, or of a lease that ran out, without polling. The embedded bbolt
// store has one writer, this process, and does not implement it.
type Watcher interface {
	// Watch sends a store revision each time the objects change after
	// fromRev: a commit by any replica or an expired lease. Revisions
	// arrive in increasing order; a receiver that falls behind gets the
	// newest only (the channel holds one), which is all it needs: it
	// re-reads the store with List. The channel is closed when ctx ends.
	// A broken connection is retried until ctx ends; changes made
	// meanwhile arrive once it is back.
	Watch(ctx context.Context, fromRev int64) <-chan int64
}
