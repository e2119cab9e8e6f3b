package admin

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const relayTok = "relay-token-5555555555"

// TestRelayReportsAreBoundedAndShownApart: a relay's report (relay token)
// is listed in /proxies under the relay's name, apart from the streams;
// an oversized, malformed or negative report is refused and keeps the
// last good one; past the bound of relays, a new relay is refused.
func TestRelayReportsAreBoundedAndShownApart(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, RelayToken: relayTok}, nil)
	good := `{"keys":[{"key":"edge","version":"v1","proxies":3,"acked":2,"nacked":1,"pending":0}]}`
	if code, body := h.do(t, "POST", "/v1/relays/relay-1", relayTok, []byte(good)); code != 204 {
		t.Fatalf("a relay's report: %d %s", code, body)
	}
	for _, bad := range []string{
		strings.Repeat(" ", maxRelayBody+1) + good,
		`{"keys":[{"key":"edge","proxies":-1}]}`,
		`{"keys":`,
	} {
		if code, _ := h.do(t, "POST", "/v1/relays/relay-1", relayTok, []byte(bad)); code/100 != 4 {
			t.Errorf("a bad report (%d bytes) answered %d, want a 4xx", len(bad), code)
		}
	}
	var got proxiesBody
	_, body := h.do(t, "GET", "/proxies", readTok, nil)
	decode(t, body, &got)
	if len(got.Relays) != 1 || got.Relays[0].Relay != "relay-1" || len(got.Relays[0].Keys) != 1 || got.Relays[0].Keys[0] != (RelayKey{Key: "edge", Version: "v1", Proxies: 3, ACKed: 2, NACKed: 1}) {
		t.Fatalf("/proxies relays %+v, want relay-1's last good report", got.Relays)
	}
	for i := 2; i <= maxRelays; i++ {
		if code, _ := h.do(t, "POST", fmt.Sprintf("/v1/relays/relay-%d", i), relayTok, []byte(`{"keys":[]}`)); code != 204 {
			t.Fatalf("relay %d's report: %d", i, code)
		}
	}
	if code, _ := h.do(t, "POST", "/v1/relays/one-too-many", relayTok, []byte(`{"keys":[]}`)); code != 429 {
		t.Errorf("a relay past the bound of %d: %d, want 429", maxRelays, code)
	}
	if code, _ := h.do(t, "POST", "/v1/relays/relay-1", relayTok, []byte(good)); code != 204 {
		t.Errorf("a held relay renewing its report: %d, want 204", code)
	}
}

// TestRelayReportsRefuseTheReadToken: the read token alone cannot post a
// relay's report (it would post or overwrite any relay's, hiding its
// NACKs); the relay token or the write token can, and the relay token
// reads nothing.
func TestRelayReportsRefuseTheReadToken(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, RelayToken: relayTok, RelayTokenFile: "/data/relay-token"}, nil)
	report := []byte(`{"keys":[{"key":"edge","proxies":1,"acked":1}]}`)
	if code, body := h.do(t, "POST", "/v1/relays/relay-1", readTok, report); code != 401 && code != 403 {
		t.Fatalf("a report with the read token: %d %s, want 401 or 403", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/relays/relay-1", "", report); code != 401 || !strings.Contains(body, "file relay-token in") || strings.Contains(body, "/data/") {
		t.Errorf("a report without a token: %d %s, want 401 naming the relay token's file by its base name", code, body)
	}
	for _, tok := range []string{relayTok, writeTok} {
		if code, body := h.do(t, "POST", "/v1/relays/relay-1", tok, report); code != 204 {
			t.Errorf("a report with the relay or the write token: %d %s, want 204", code, body)
		}
	}
	if code, _ := h.do(t, "GET", "/proxies", relayTok, nil); code != 401 {
		t.Errorf("GET /proxies with the relay token: %d, want 401: it authorises reports only", code)
	}
}

// Reports past their expiry make room for new relays at once, not only
// once someone reads the list: relays gone for good must not keep a new
// one out.
func TestExpiredRelayReportsMakeRoom(t *testing.T) {
	rr := NewRelayReports()
	old := time.Now().Add(-2 * RelayReportExpires)
	for i := range maxRelays {
		rr.m[fmt.Sprint("gone-", i)] = RelayReport{Relay: fmt.Sprint("gone-", i), ReportedAt: old}
	}
	if !rr.put(RelayReport{Relay: "new", ReportedAt: time.Now()}) {
		t.Fatalf("a new relay refused with %d expired reports held", maxRelays)
	}
	rr.m["fresh"] = RelayReport{Relay: "fresh", ReportedAt: time.Now()}
	for i := range maxRelays {
		rr.m[fmt.Sprint("live-", i)] = RelayReport{Relay: fmt.Sprint("live-", i), ReportedAt: time.Now()}
	}
	if rr.put(RelayReport{Relay: "one-too-many", ReportedAt: time.Now()}) {
		t.Fatal("a relay past the bound of live reports was kept")
	}
}
