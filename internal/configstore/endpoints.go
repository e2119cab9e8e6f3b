package configstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/store"
)

// endpointKey names a registered endpoint of a service.
func endpointKey(service string, e model.Endpoint) store.Key {
	return store.Key{Kind: "endpoints." + service, Name: fmt.Sprintf("%s:%d", e.Address, e.Port)}
}

// Register adds an endpoint to a service without rewriting the service. With
// a ttl the endpoint is leased: it leaves EDS unless registered again within
// ttl. Registering an unchanged endpoint only renews its lease: no new
// revision, no history entry, nothing pushed.
func (s *Service) Register(ctx context.Context, service string, e model.Endpoint, ttl time.Duration) (Result, error) {
	if _, err := s.opts.Store.Get(ctx, store.Key{Kind: "services", Name: service}); err != nil {
		return Result{}, fmt.Errorf("service %q: %w", service, err)
	}
	body, err := json.Marshal(e)
	if err != nil {
		return Result{}, err
	}
	var expires time.Time
	if ttl > 0 {
		expires = s.opts.Now().Add(ttl)
	}
	k := endpointKey(service, e)
	if cur, err := s.opts.Store.Get(ctx, k); err == nil && bytes.Equal(cur.Body, body) && (ttl > 0) == !cur.Expires.IsZero() {
		if ttl > 0 {
			return Result{Revision: cur.Revision}, s.opts.Store.Touch(ctx, k, expires)
		}
		return Result{Revision: cur.Revision}, nil
	}
	return s.Commit(ctx, []store.Change{{Key: k, Body: body, Expires: expires}}, fmt.Sprintf("register %s in %s", k.Name, service), false)
}

// Deregister removes a registered endpoint.
func (s *Service) Deregister(ctx context.Context, service, address string, port uint32) (Result, error) {
	k := endpointKey(service, model.Endpoint{Address: address, Port: port})
	if _, err := s.opts.Store.Get(ctx, k); err != nil {
		return Result{}, fmt.Errorf("endpoint %s of %s: %w", k.Name, service, err)
	}
	return s.Commit(ctx, []store.Change{{Key: k}}, fmt.Sprintf("deregister %s from %s", k.Name, service), false)
}

// expire removes the leased endpoints whose time is up, in one commit.
func (s *Service) expire(ctx context.Context) error {
	objs, _, err := s.opts.Store.List(ctx)
	if err != nil {
		return err
	}
	now := s.opts.Now()
	var changes []store.Change
	for _, o := range objs {
		if !o.Expires.IsZero() && !o.Expires.After(now) {
			changes = append(changes, store.Change{Key: o.Key, Revision: o.Revision})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	_, err = s.Commit(ctx, changes, fmt.Sprintf("%d endpoint lease(s) expired", len(changes)), false)
	if errors.Is(err, store.ErrConflict) {
		return nil // renewed meanwhile
	}
	return err
}

// Rollback republishes the configuration of revision rev as a new revision.
func (s *Service) Rollback(ctx context.Context, rev int64, dryRun bool) (Result, error) {
	entry, err := s.opts.Store.At(ctx, rev)
	if err != nil {
		return Result{}, err
	}
	objs, _, err := s.opts.Store.List(ctx)
	if err != nil {
		return Result{}, err
	}
	want := map[store.Key]store.Object{}
	for _, o := range entry.Objects {
		want[o.Key] = o
	}
	var changes []store.Change
	for _, o := range objs {
		if _, keep := want[o.Key]; !keep {
			changes = append(changes, store.Change{Key: o.Key})
		}
	}
	for _, o := range entry.Objects {
		changes = append(changes, store.Change{Key: o.Key, Body: o.Body, Expires: o.Expires})
	}
	return s.Commit(ctx, changes, fmt.Sprintf("rollback to revision %d", rev), dryRun)
}
