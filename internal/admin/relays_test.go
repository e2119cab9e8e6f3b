package admin

import (
	"fmt"
	"strings"
	"testing"
)

// TestRelayReportsAreBoundedAndShownApart: a relay's report (read token)
// is listed in /proxies under the relay's name, apart from the streams;
// an oversized, malformed or negative report is refused and keeps the
// last good one; past the bound of relays, a new relay is refused.
func TestRelayReportsAreBoundedAndShownApart(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	good := `{"keys":[{"key":"edge","version":"v1","proxies":3,"acked":2,"nacked":1,"pending":0}]}`
	if code, body := h.do(t, "POST", "/v1/relays/relay-1", readTok, []byte(good)); code != 204 {
		t.Fatalf("a relay's report: %d %s", code, body)
	}
	for _, bad := range []string{
		strings.Repeat(" ", maxRelayBody+1) + good,
		`{"keys":[{"key":"edge","proxies":-1}]}`,
		`{"keys":`,
	} {
		if code, _ := h.do(t, "POST", "/v1/relays/relay-1", readTok, []byte(bad)); code/100 != 4 {
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
		if code, _ := h.do(t, "POST", fmt.Sprintf("/v1/relays/relay-%d", i), readTok, []byte(`{"keys":[]}`)); code != 204 {
			t.Fatalf("relay %d's report: %d", i, code)
		}
	}
	if code, _ := h.do(t, "POST", "/v1/relays/one-too-many", readTok, []byte(`{"keys":[]}`)); code != 429 {
		t.Errorf("a relay past the bound of %d: %d, want 429", maxRelays, code)
	}
	if code, _ := h.do(t, "POST", "/v1/relays/relay-1", readTok, []byte(good)); code != 204 {
		t.Errorf("a held relay renewing its report: %d, want 204", code)
	}
}
