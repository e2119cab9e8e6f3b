package fleetstatus

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

func relayReport(name string, keys int) Relay {
	r := Relay{Relay: name, ReportedAt: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)}
	for i := range keys {
		r.Keys = append(r.Keys, RelayKey{Key: fmt.Sprintf("key-%04d-%s", i, noise(64)), Version: "v1", Proxies: 3, ACKed: 2, NACKed: 1})
	}
	return r
}

// A replica's relays' reports travel in its summary: split into shards
// that fit, beside the proxies, and read back whole.
func TestRelayReportsTravelInTheSummary(t *testing.T) {
	proxies, _ := Summarize([]status.Stream{stream("n1", "x")}, 10)
	relays := []Relay{relayReport("relay-a", 300), relayReport("relay-b", 300)}
	const maxValue = 16 << 10
	shards, err := encodeSummary(3, Self{}, summary{proxies: proxies, relays: relays}, maxValue)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range shards {
		if len(s) > maxValue {
			t.Errorf("shard %d is %d bytes, more than %d", i, len(s), maxValue)
		}
	}
	got, err := decodeAll(shards)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.proxies) != 1 || len(got.relays) != 2 || len(got.relays[0].Keys)+len(got.relays[1].Keys) != 600 {
		t.Fatalf("decoded %d proxies and %d relays, want 1 and 2 of 300 keys each", len(got.proxies), len(got.relays))
	}
	// A summary without the field (a replica of before) reads as no relays.
	old, _ := Encode(1, Self{}, proxies, 0, maxValue)
	if got, err := decodeAll(old); err != nil || got.relays != nil || len(got.proxies) != 1 {
		t.Fatalf("an old summary read as %d proxies, relays %v (%v)", len(got.proxies), got.relays, err)
	}
}

// What a replica publishes of its relays is bounded: relays past
// MaxRelayKeys keys in all are counted, not published; a summary holding
// more relays, or a report more keys, than a replica publishes is
// refused; the texts are cut.
func TestRelayReportsAreBounded(t *testing.T) {
	var many []Relay
	for i := range MaxRelayKeys/1000 + 2 {
		// Short keys: the key count binds here, not MaxRelayBytes.
		r := Relay{Relay: fmt.Sprintf("relay-%d", i)}
		for j := range 1000 {
			r.Keys = append(r.Keys, RelayKey{Key: fmt.Sprint(j)})
		}
		many = append(many, r)
	}
	kept, omitted := boundRelays(many)
	if n := countKeys(kept); n > MaxRelayKeys || omitted != 2 {
		t.Fatalf("published %d keys (at most %d), omitted %d relays, want 2", n, MaxRelayKeys, omitted)
	}
	big := relayReport("relay-big", MaxRelayKeysPerReport+1)
	b, err := compress(shard{Format: format, Of: 1, Relays: []Relay{big}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(b); err == nil || !strings.Contains(err.Error(), "keys") {
		t.Fatalf("a report of %d keys decoded (%v), want it refused", MaxRelayKeysPerReport+1, err)
	}
	long := Relay{Relay: strings.Repeat("r", 5000), Keys: []RelayKey{{Key: strings.Repeat("k", 5000), Proxies: -4}}}
	b, _ = compress(shard{Format: format, Of: 1, Relays: []Relay{long}})
	sh, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if r := sh.Relays[0]; len(r.Relay) > maxText+4 || len(r.Keys[0].Key) > maxText+4 || r.Keys[0].Proxies != 0 {
		t.Fatalf("decoded %d and %d bytes, %d proxies; want texts cut and no negative count", len(r.Relay), len(r.Keys[0].Key), r.Keys[0].Proxies)
	}
}

// A relay reporting to one replica is listed by another, as that
// replica's, and marked stale while etcd cannot be read.
func TestAnotherReplicaListsARelaysReport(t *testing.T) {
	srv := etcdtest.Start(t)
	st := srv.Open(t, "/fleet", 200*time.Millisecond)
	var mu sync.Mutex
	reports := []Relay{relayReport("relay-site-1", 2)}
	a := New(Options{Replica: "a", Store: st, Local: (&local{}).get, Period: 50 * time.Millisecond, TTL: 10 * time.Second,
		Relays: func() []Relay { mu.Lock(); defer mu.Unlock(); return reports }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	b, _ := run(t, srv.Open(t, "/fleet", 200*time.Millisecond), "b", &local{}, 10*time.Second)
	waitFor(t, "replica b lists relay-site-1 as replica a's", func() bool {
		got := b.Relays()
		return len(got) == 1 && got[0].Replica == "a" && got[0].Relay.Relay == "relay-site-1" && len(got[0].Keys) == 2 && !got[0].Stale
	})
	srv.Stop()
	waitFor(t, "with etcd away, replica b marks the report stale", func() bool {
		got := b.Relays()
		return len(got) == 1 && got[0].Stale
	})
	srv.Restart()
	waitFor(t, "with etcd back, the report is current again", func() bool {
		got := b.Relays()
		return len(got) == 1 && !got[0].Stale
	})
	mu.Lock()
	reports = nil
	mu.Unlock()
	waitFor(t, "replica b drops the report replica a no longer holds", func() bool { return len(b.Relays()) == 0 })
}

// The texts a replica publishes of its relays are bounded in bytes too:
// a holder of the relay token sending kilobyte keys gets its reports past
// MaxRelayBytes counted, not published (every replica would otherwise
// write tens of megabytes to etcd).
func TestRelayReportsAreBoundedInBytes(t *testing.T) {
	var big []Relay
	for i := range 60 {
		r := Relay{Relay: fmt.Sprintf("relay-%d", i)}
		for j := range 100 {
			r.Keys = append(r.Keys, RelayKey{Key: fmt.Sprintf("%04d-%s", j, strings.Repeat("k", 1000))})
		}
		big = append(big, r)
	}
	kept, omitted := boundRelays(big)
	size := 0
	for _, r := range kept {
		size += relayBytes(r)
	}
	if size > MaxRelayBytes || omitted == 0 || len(kept) == 0 {
		t.Fatalf("kept %d reports of %d bytes, omitted %d; want at most %d bytes kept, the rest omitted", len(kept), size, omitted, MaxRelayBytes)
	}
}

// countingBoard is a Board that counts the summaries put.
type countingBoard struct{ puts int }

func (b *countingBoard) Put(context.Context, [][]byte) error     { b.puts++; return nil }
func (b *countingBoard) KeepAlive(context.Context) (bool, error) { return b.puts > 0, nil }
func (b *countingBoard) Revoke(context.Context) error            { return nil }

// A summary whose relays' reports changed only their times is not
// written again each period (relaysRefresh): relays report every few
// seconds, and each write is every shard of the summary into etcd.
func TestRelayReportTimesAloneDoNotRewriteTheSummary(t *testing.T) {
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	board := &countingBoard{}
	report := relayReport("relay-a", 2)
	f := &Fleet{opts: Options{Replica: "a", Local: (&local{}).get, MaxProxies: 10, Relays: func() []Relay {
		at = at.Add(time.Second)
		r := report
		r.ReportedAt = at
		return []Relay{r}
	}, Logger: slog.New(slog.DiscardHandler)}, board: board}
	p := publisher{f: f}
	for range 5 {
		if err := p.publish(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if board.puts != 1 {
		t.Errorf("%d summaries written over five periods in which only the report's time changed, want 1", board.puts)
	}
}
