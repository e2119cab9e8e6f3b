package metrics

import (
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// The expiry gauge is the seconds from the scrape to the earliest expiry
// each kind's source reports, read at the scrape, labelled with the kind
// alone; a kind with no source, or nothing to report, has no series.
func TestCertificateExpirySecondsByKind(t *testing.T) {
	m := New(status.NewTracker(status.Options{}))
	if got := gather(t, m, certExpiryName); len(got) != 0 {
		t.Fatalf("series before any source: %v", got)
	}
	secret := time.Now().Add(30 * 24 * time.Hour)
	server := time.Now().Add(-time.Hour) // expired: negative
	m.CertificateExpiry(CertSecret, func() (time.Time, bool) { return secret, true })
	m.CertificateExpiry(CertServer, func() (time.Time, bool) { return server, true })
	m.CertificateExpiry(CertClient, func() (time.Time, bool) { return time.Time{}, false })

	before := time.Now()
	got := gather(t, m, certExpiryName)
	after := time.Now()
	if len(got) != 2 {
		t.Fatalf("series %v, want kind=secret and kind=server only (no client connected)", got)
	}
	for key, at := range map[string]time.Time{certExpiryName + " kind=secret": secret, certExpiryName + " kind=server": server} {
		v, ok := got[key]
		if !ok {
			t.Errorf("no series %s in %v", key, got)
			continue
		}
		if hi, lo := at.Sub(before).Seconds(), at.Sub(after).Seconds(); v > hi || v < lo {
			t.Errorf("%s = %v, want between %v and %v", key, v, lo, hi)
		}
	}

	// The sources are read at every scrape: a later expiry shows at once.
	secret = secret.Add(24 * time.Hour)
	if v := gather(t, m, certExpiryName)[certExpiryName+" kind=secret"]; v < (30*24*time.Hour + 23*time.Hour).Seconds() {
		t.Errorf("kind=secret = %v after the source moved a day later", v)
	}
}
