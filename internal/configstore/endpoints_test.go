package configstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Issue 13 item 7: a lease that runs out is logged at INFO with the
// service, the address and how long the endpoint was registered.
func TestLeaseExpiryLogged(t *testing.T) {
	st := newBolt(t)
	var logs bytes.Buffer
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := New(Options{Store: st, Registry: xdstype.New(), Now: clk.Now, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx := t.Context()
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	ep := model.Endpoint{Address: "::1", Port: 8080}
	if _, err := s.Register(ctx, "web", ep, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Renewed twice, then left to run out.
	for range 2 {
		clk.Add(20 * time.Second)
		if _, err := s.Register(ctx, "web", ep, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(20 * time.Second)
	if err := s.expire(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "lease expired") {
		t.Fatalf("logged before the lease ran out: %s", logs.String())
	}
	clk.Add(15 * time.Second)
	if err := s.expire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, store.Key{Kind: "endpoints.web", Name: "[::1]:8080"}); err == nil {
		t.Fatal("the endpoint outlived its lease")
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "endpoint lease expired" {
			line = m
		}
	}
	want := map[string]any{"level": "INFO", "service": "web", "address": "[::1]:8080", "registered_for": "1m15s"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (log: %s)", k, line[k], v, logs.String())
		}
	}
	if s.leases.since[store.Key{Kind: "endpoints.web", Name: "[::1]:8080"}] != (time.Time{}) {
		t.Error("the expired lease is still remembered")
	}
}

// Issue 13 item 7: a raw Cluster's name answers why endpoints cannot be
// registered, as a validation error (400), not a bare not-found.
func TestRegisterOnRawClusterSaysWhy(t *testing.T) {
	s := newService(t, 0)
	ctx := t.Context()
	raw := []byte(`{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"raw","connectTimeout":"1s"}`)
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "resources.Cluster", Name: "raw"}, Body: raw}}, "raw", false); err != nil {
		t.Fatal(err)
	}
	_, err := s.Register(ctx, "raw", model.Endpoint{Address: "10.0.0.1", Port: 80}, 0)
	if err == nil || !strings.Contains(err.Error(), "service raw is a raw Cluster; endpoints can only be registered for model services") {
		t.Fatalf("register on a raw cluster: %v", err)
	}
	var ve *ValidationError
	if !asValidation(err, &ve) {
		t.Fatalf("not a validation error: %T", err)
	}
	if _, err := s.Register(ctx, "missing", model.Endpoint{Address: "10.0.0.1", Port: 80}, 0); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("register on no service: %v", err)
	}
}

// Endpoint addresses: IPv6 is taken, an address with a port in it is not.
func TestEndpointAddresses(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{{"10.0.0.1", true}, {"::1", true}, {"fe80::1%eth0", true}, {"web.internal", true}, {"10.0.0.1:80", false}, {"[::1]", false}, {strings.Repeat("a", maxAddress+1), false}} {
		err := checkEndpoint("web", service("web", 80), model.Endpoint{Address: c.addr, Port: 8080})
		if (err == nil) != c.ok {
			t.Errorf("address %q: %v", c.addr, err)
		}
	}
}

func asValidation(err error, target **ValidationError) bool { return errors.As(err, target) }

// hookedStore runs onList (once armed) inside List, after reading: the
// moment between expire's read of the leases and its commit.
type hookedStore struct {
	store.Store
	onList func()
}

func (h *hookedStore) List(ctx context.Context) ([]store.Object, int64, error) {
	objs, rev, err := h.Store.List(ctx)
	if f := h.onList; f != nil {
		h.onList = nil
		f()
	}
	return objs, rev, err
}

// A renewal that lands while expiry is between its read and its commit is
// not lost: the endpoint the client just renewed stays registered.
func TestRenewalDuringExpiryKept(t *testing.T) {
	st := newBolt(t)
	hs := &hookedStore{Store: st}
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := New(Options{Store: hs, Registry: xdstype.New(), Now: clk.Now})
	ctx := t.Context()
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	ep := model.Endpoint{Address: "10.0.0.5", Port: 80}
	if _, err := s.Register(ctx, "web", ep, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * time.Second) // due now
	renewed := make(chan error, 1)
	hs.onList = func() {
		go func() {
			_, err := s.Register(ctx, "web", ep, 10*time.Second)
			renewed <- err
		}()
		// Give the renewal the chance to land inside expiry. With expiry
		// and renewals ordered it cannot: it waits, and this bound passes.
		select {
		case err := <-renewed:
			renewed <- err
		case <-time.After(300 * time.Millisecond):
		}
	}
	if err := s.expire(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-renewed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal never returned")
	}
	if _, err := st.Get(ctx, store.Key{Kind: "endpoints.web", Name: "10.0.0.5:80"}); err != nil {
		t.Fatalf("an endpoint renewed during expiry was dropped: %v", err)
	}
}
