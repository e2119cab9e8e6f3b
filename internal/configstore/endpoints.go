package configstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/store"
)

// endpointKey names a registered endpoint of a service.
func endpointKey(service string, e model.Endpoint) store.Key {
	return store.Key{Kind: "endpoints." + service, Name: net.JoinHostPort(e.Address, strconv.FormatUint(uint64(e.Port), 10))}
}

// Register adds an endpoint to a service without rewriting the service. With
// a ttl the endpoint is leased: it leaves EDS unless registered again within
// ttl. Registering an unchanged endpoint only renews its lease: no new
// revision, nothing pushed.
//
// Registrations are the high-churn path: the endpoint is checked on its own
// (the same rules a service's endpoints get), stored and fsynced, and
// published with the next debounced update, without compiling the whole
// config on every call. They are runtime state, not config history: they do
// not fill the history, and a rollback leaves them in place. A service
// deleted (by a delete, a prune or a rollback) takes its registrations
// with it, in the same revision (withRegistrations).
func (s *Service) Register(ctx context.Context, service string, e model.Endpoint, ttl time.Duration) (Result, error) {
	svc, err := s.st.Get(ctx, store.Key{Kind: "services", Name: service})
	if errors.Is(err, store.ErrNotFound) {
		if _, rawErr := s.st.Get(ctx, store.Key{Kind: "resources.Cluster", Name: service}); rawErr == nil {
			return Result{}, &ValidationError{Err: fmt.Errorf("service %s is a raw Cluster; endpoints can only be registered for model services (give the Cluster's endpoints in its load_assignment, or define it under services)", service)}
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("service %q: %w", service, err)
	}
	if err := s.own.check(service, svc.Body, e); err != nil {
		return Result{}, &ValidationError{Err: err}
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
	if res, renewed, err := s.renew(ctx, k, body, ttl > 0, expires); renewed || err != nil {
		return res, err
	}
	res, err := s.commitRuntime(ctx, []store.Change{{Key: k, Body: body, Expires: expires}})
	if err == nil {
		s.leases.registered(k, s.opts.Now())
	}
	return res, err
}

// renew handles a registration of an endpoint already stored as it is:
// only its lease is renewed (no new revision, nothing pushed). It holds
// renewMu, as expire does from its read to its commit: a renewal between
// them would otherwise be lost, the endpoint dropped just after its lease
// was extended (a renewal changes no revision for expire's commit to
// conflict on).
func (s *Service) renew(ctx context.Context, k store.Key, body []byte, leased bool, expires time.Time) (Result, bool, error) {
	s.renewMu.RLock()
	defer s.renewMu.RUnlock()
	cur, err := s.st.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) || err == nil && (!bytes.Equal(cur.Body, body) || leased != !cur.Expires.IsZero()) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, false, err
	}
	s.leases.registered(k, s.opts.Now())
	if leased {
		err := s.st.Touch(ctx, k, expires)
		if errors.Is(err, store.ErrNotFound) {
			// It ran out between the read and the renewal (a store
			// that expires leases itself): register it anew.
			return Result{}, false, nil
		}
		return Result{Revision: cur.Revision}, true, err
	}
	return Result{Revision: cur.Revision}, true, nil
}

// checkEndpoint applies the model's endpoint rules to one registration.
func checkEndpoint(service string, serviceBody []byte, e model.Endpoint) error {
	return (*ownEndpoints)(nil).check(service, serviceBody, e)
}

// ownEndpoints remembers the endpoints a few services list themselves,
// each with the body they were decoded from, so that a registration
// decodes its service again only when the service changed: every
// registration checks it is not one of them, and a busy service takes
// thousands of registrations between two changes. A body is compared
// whole (a changed service is decoded again); at most maxOwnServices
// services, with bodies of up to maxOwnBody bytes, are kept. The zero
// value is ready; nil keeps nothing.
type ownEndpoints struct {
	mu   sync.Mutex
	last map[string]ownList
}

type ownList struct {
	body []byte
	eps  []model.Endpoint
}

const (
	maxOwnServices = 16
	maxOwnBody     = 64 << 10
)

// of returns the endpoints serviceBody lists, nil when it does not decode.
func (c *ownEndpoints) of(service string, serviceBody []byte) []model.Endpoint {
	if c != nil {
		c.mu.Lock()
		l, ok := c.last[service]
		c.mu.Unlock()
		if ok && bytes.Equal(l.body, serviceBody) {
			return l.eps
		}
	}
	var svc model.Service
	if err := json.Unmarshal(serviceBody, &svc); err != nil {
		return nil
	}
	if c != nil && len(serviceBody) <= maxOwnBody {
		c.mu.Lock()
		if c.last == nil || len(c.last) >= maxOwnServices {
			c.last = map[string]ownList{}
		}
		c.last[service] = ownList{body: bytes.Clone(serviceBody), eps: svc.Endpoints}
		c.mu.Unlock()
	}
	return svc.Endpoints
}

// check applies the model's endpoint rules to one registration.
func (c *ownEndpoints) check(service string, serviceBody []byte, e model.Endpoint) error {
	field := func(f, format string, args ...any) error {
		return diag.List{{File: "endpoints." + service, Type: "endpoint", Name: endpointKey(service, e).Name, Field: f, Message: fmt.Sprintf(format, args...)}}
	}
	switch {
	case e.Address == "":
		return field("address", "missing")
	case len(e.Address) > maxAddress:
		return field("address", "longer than %d bytes", maxAddress)
	case strings.Contains(e.Address, ":") && !isIPv6(e.Address):
		return field("address", "%q is neither an IPv6 address nor a host name (give the port in port)", e.Address)
	case e.Port == 0 || e.Port > 65535:
		return field("port", "must be 1 to 65535")
	}
	switch e.Health {
	case "", "unknown", "healthy", "unhealthy", "draining":
	default:
		return field("health", "%q is not one of healthy, unhealthy, draining, unknown", e.Health)
	}
	for _, s := range c.of(service, serviceBody) {
		if s.Address == e.Address && s.Port == e.Port {
			return field("", "already one of the service's own endpoints")
		}
	}
	return nil
}

// Deregister removes a registered endpoint.
func (s *Service) Deregister(ctx context.Context, service, address string, port uint32) (Result, error) {
	k := endpointKey(service, model.Endpoint{Address: address, Port: port})
	if _, err := s.st.Get(ctx, k); err != nil {
		return Result{}, fmt.Errorf("endpoint %s of %s: %w", k.Name, service, err)
	}
	res, err := s.commitRuntime(ctx, []store.Change{{Key: k}})
	if err == nil {
		s.leases.forget(k)
	}
	return res, err
}

// expire removes the leased endpoints whose time is up, in one commit.
func (s *Service) expire(ctx context.Context) error {
	s.renewMu.Lock()
	defer s.renewMu.Unlock()
	objs, _, err := s.st.List(ctx)
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
	s.leases.keepOnly(objs)
	if len(changes) == 0 {
		return nil
	}
	_, err = s.commitRuntime(ctx, changes)
	if errors.Is(err, store.ErrConflict) {
		return nil // renewed meanwhile
	}
	if err != nil {
		return err
	}
	for _, c := range changes {
		s.logExpired(c.Key, now)
	}
	return nil
}

// logExpired says, at INFO, that a lease ran out: an endpoint that
// vanished from EDS without a deregistration is the first thing an
// operator looks for when traffic to an instance stops.
func (s *Service) logExpired(k store.Key, now time.Time) {
	attrs := []any{"service", strings.TrimPrefix(k.Kind, "endpoints."), "address", k.Name}
	if since, ok := s.leases.forget(k); ok {
		attrs = append(attrs, "registered_for", now.Sub(since).Round(time.Second).String())
	} else {
		attrs = append(attrs, "registered_for", "unknown (registered before this Pylon started)")
	}
	s.log.Info("endpoint lease expired", attrs...)
}

// maxAddress bounds an endpoint's address: a DNS name is at most 253
// bytes.
const maxAddress = 255

// isIPv6 reports whether a is an IPv6 address (zone allowed).
func isIPv6(a string) bool {
	ip, err := netip.ParseAddr(a)
	return err == nil && ip.Is6()
}

// leases remembers when each leased endpoint was first registered (in
// this process), for the expiry's log line. It holds at most one entry
// per stored endpoint: entries leave on deregistration, expiry, and when
// the store no longer holds the endpoint.
type leases struct {
	mu    sync.Mutex
	since map[store.Key]time.Time
}

// registered records a registration; a renewal keeps the first time.
func (l *leases) registered(k store.Key, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since == nil {
		l.since = map[store.Key]time.Time{}
	}
	if _, ok := l.since[k]; !ok {
		l.since[k] = now
	}
}

// forget drops k and returns when it was registered.
func (l *leases) forget(k store.Key) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.since[k]
	delete(l.since, k)
	return t, ok
}

// keepOnly drops the entries of endpoints no longer stored (removed by a
// generic delete, say).
func (l *leases) keepOnly(objs []store.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.since) == 0 {
		return
	}
	stored := make(map[store.Key]bool, len(objs))
	for _, o := range objs {
		stored[o.Key] = true
	}
	for k := range l.since {
		if !stored[k] {
			delete(l.since, k)
		}
	}
}

// Rollback republishes the configuration of revision rev as a new revision.
// Only what differs from the stored config is written: a rollback on etcd
// must fit in one transaction (128 operations, 1.5 MiB by default), and
// what it leaves alone keeps its revision. The difference is taken again
// from each read a commit validates, so a commit through another replica
// meanwhile is rolled back too, not missed.
func (s *Service) Rollback(ctx context.Context, rev int64, dryRun bool) (Result, error) {
	entry, err := s.st.At(ctx, rev)
	if err != nil {
		return Result{}, err
	}
	plan := func(objs []store.Object) []store.Change { return rollbackChanges(entry.Objects, objs) }
	return s.commit(ctx, plan, fmt.Sprintf("rollback to revision %d", rev), dryRun)
}

// withRegistrations adds to changes the deletion of every endpoint
// registered for a service that changes delete: a service's registrations
// are its instances, and left behind they would come back with a new
// service of the same name (an address since given to something else).
// They go in the same revision, listed in its result.
func withRegistrations(objs []store.Object, changes []store.Change) []store.Change {
	gone := map[string]bool{}
	for _, c := range changes {
		if c.Kind == "services" {
			gone[c.Name] = c.Body == nil
		}
	}
	deleting := map[store.Key]bool{}
	for _, c := range changes {
		deleting[c.Key] = c.Body == nil
	}
	var eps []store.Change
	for _, o := range objs {
		svc, ok := strings.CutPrefix(o.Kind, "endpoints.")
		if ok && gone[svc] && !deleting[o.Key] {
			eps = append(eps, store.Change{Key: o.Key})
		}
	}
	sort.Slice(eps, func(i, j int) bool { return compareKeys(eps[i].Key, eps[j].Key) < 0 })
	return append(changes, eps...)
}

// rollbackChanges are the changes that turn the current objects into the
// config objects of target. Registered endpoints are runtime state: a
// rollback of the config leaves them as they are (but for those of a
// service it deletes: withRegistrations).
func rollbackChanges(target, current []store.Object) []store.Change {
	runtime := func(o store.Object) bool { return strings.HasPrefix(o.Kind, "endpoints.") }
	want := map[store.Key]store.Object{}
	for _, o := range target {
		if !runtime(o) {
			want[o.Key] = o
		}
	}
	var changes []store.Change
	for _, o := range current {
		if runtime(o) {
			continue
		}
		w, keep := want[o.Key]
		switch {
		case !keep:
			changes = append(changes, store.Change{Key: o.Key})
		case sameBody(w.Body, o.Body) && w.Expires.Equal(o.Expires):
		default:
			changes = append(changes, store.Change{Key: w.Key, Body: w.Body, Expires: w.Expires})
		}
		delete(want, o.Key)
	}
	for _, w := range want {
		changes = append(changes, store.Change{Key: w.Key, Body: w.Body, Expires: w.Expires})
	}
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].Kind != changes[j].Kind {
			return changes[i].Kind < changes[j].Kind
		}
		return changes[i].Name < changes[j].Name
	})
	return changes
}
