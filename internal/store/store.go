// Package store defines where the embedded default keeps its configuration:
// objects (model objects and raw resources) with revisions, and the history
// of accepted configurations. bolt/ is the default backend; an etcd backend
// will implement the same interface and pass the same storetest suite.
package store

import (
	"context"
	"errors"
	"net/url"
	"time"
)

// Key names an object: its kind ("services", "routes", "listeners",
// "secrets", "grpc", "groups", "resources.Cluster", ..., or
// "endpoints.<service>" for registered endpoints) and its name.
type Key struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// SealContext is what a stored body is bound to when a store seals it
// (package seal: the additional data): its kind and name, so that a sealed
// body moved to another object does not open.
func SealContext(k Key) string { return url.PathEscape(k.Kind) + "/" + k.Name }

// Object is a stored object: its JSON body and the store revision that last
// wrote it.
type Object struct {
	Key
	Body     []byte `json:"body"`
	Revision int64  `json:"revision"`
	// Expires, for leased objects (registered endpoints), is when the
	// object is dropped unless renewed.
	Expires time.Time `json:"expires,omitzero"`
}

// Change is one write in a transaction: Body nil deletes. Revision, when
// not zero, must equal the object's current revision (-1: must not exist),
// or the whole transaction fails with ErrConflict.
type Change struct {
	Key
	Body     []byte
	Revision int64
	Expires  time.Time
}

// Entry is one accepted configuration in the history. A store keeps what
// each revision changed, not a copy of every object per entry: Objects is
// filled in by At (the whole config as of the entry's revision) and empty
// everywhere else.
type Entry struct {
	Revision int64     `json:"revision"`
	At       time.Time `json:"at"`
	Summary  string    `json:"summary"`
	Version  string    `json:"version"` // the fleet version it produced
	Objects  []Object  `json:"objects,omitempty"`
}

// Errors a store returns.
var (
	ErrConflict = errors.New("revision conflict")
	ErrNotFound = errors.New("not found")
	// ErrTooLarge is a commit the store refused whole, before writing
	// anything, for its size (etcd: more operations or bytes than one
	// transaction takes): split the change.
	ErrTooLarge = errors.New("too large for one commit")
)

// Store keeps objects and history. Writes are durable when they return.
type Store interface {
	// List returns every object and the store's current revision.
	List(ctx context.Context) ([]Object, int64, error)
	// Get returns one object.
	Get(ctx context.Context, k Key) (Object, error)
	// Commit applies changes atomically at a new revision and, when entry
	// is not nil, records it in the history (its Revision filled in by the
	// store, keeping at most keep entries; keep <= 0 keeps all). It returns
	// the new revision.
	//
	// The room a commit takes is proportional to what it changes: a body
	// is stored once per revision that wrote it, never copied for the
	// objects a commit leaves alone, and a stored body is dropped as soon
	// as neither the current objects nor a kept entry read it (pruning
	// the history past keep drops what only the pruned entries read; a
	// commit without an entry drops the body it replaces unless an entry
	// reads it). storetest checks both.
	Commit(ctx context.Context, changes []Change, entry *Entry, keep int) (int64, error)
	// Touch renews leases without a new revision or history entry: the
	// content is unchanged.
	Touch(ctx context.Context, k Key, expires time.Time) error
	// History returns the entries, newest first, without their objects.
	History(ctx context.Context) ([]Entry, error)
	// At returns the history entry of a revision with every object as it
	// was at that revision (leases as written), including objects written
	// by commits without an entry; rollback and diff rely on it. A revision
	// no longer (or never) in the history is ErrNotFound.
	At(ctx context.Context, rev int64) (Entry, error)
	// Close releases the store.
	Close() error
}

// Resealer is a store that seals the bodies it keeps (package seal): Reseal
// seals again, under the first key of its keyring, every body stored in
// clear or under another key, and returns how many. The daemon calls it at
// start, so that a new first key, or a key given to a store written
// without one, applies to what is already stored.
type Resealer interface {
	Reseal(ctx context.Context) (int, error)
}
