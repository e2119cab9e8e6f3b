package daemon

import (
	"crypto/x509"
	"encoding/pem"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// reportExpiry gives the expiry metric Pylon's own serving certificates
// (xDS and admin, whichever are configured) and the client certificates
// of the open xDS connections. The Secrets' source is NewObservability's.
func reportExpiry(m *metrics.Metrics, s *security, srv *xds.Server) {
	var own []*certs.Server
	for _, c := range []*certs.Server{s.xdsTLS, s.adminTLS} {
		if c != nil {
			own = append(own, c)
		}
	}
	if len(own) > 0 {
		m.CertificateExpiry(metrics.CertServer, func() (time.Time, bool) {
			soonest := own[0].Expiry()
			for _, c := range own[1:] {
				if at := c.Expiry(); at.Before(soonest) {
					soonest = at
				}
			}
			return soonest, true
		})
	}
	m.CertificateExpiry(metrics.CertClient, srv.ClientCertExpiry)
}

// secretExpiry is the expiry metric's source for the Secrets pub serves:
// the earliest NotAfter among the certificate chains of every group's
// Secrets, and of the snapshot a staged rollout still serves to the
// nodes outside its stage. Worked out once per published fleet, at the
// scrape after it, parsing only the Secrets not in the fleet read before
// (by resource version, a hash of the content): a publish that changes a
// route does not cost a parse of every chain.
func secretExpiry(pub *fleet.Publisher) metrics.ExpirySource {
	return (&secretExpiries{pub: pub}).source
}

// secretExpiries is secretExpiry's state.
type secretExpiries struct {
	pub *fleet.Publisher

	mu     sync.Mutex
	of     *fleet.Fleet
	at     time.Time
	served bool
	// byVersion is the expiry of each Secret of the fleet read last, by
	// resource version (the zero time: no certificate inline); parses
	// counts the Secrets parsed, for tests.
	byVersion map[string]time.Time
	parses    int
}

func (e *secretExpiries) source() (time.Time, bool) {
	f := e.pub.Current()
	e.mu.Lock()
	defer e.mu.Unlock()
	if f != e.of {
		e.of = f
		e.at, e.served = e.fleetExpiry(f)
	}
	return e.at, e.served
}

// fleetExpiry is the earliest expiry among f's Secrets' certificate
// chains, and false when f serves none. It keeps the expiries of f's
// Secrets only, for the next fleet: as many as f serves.
func (e *secretExpiries) fleetExpiry(f *fleet.Fleet) (time.Time, bool) {
	if f == nil {
		e.byVersion = nil
		return time.Time{}, false
	}
	seen := map[string]time.Time{}
	var soonest time.Time
	for _, g := range f.Groups() {
		snaps := []*snapshot.Snapshot{g.Snapshot}
		if prev, _ := f.Previous(g.Name); prev != nil {
			snaps = append(snaps, prev)
		}
		for _, s := range snaps {
			set := s.Set(xdstype.SecretURL)
			for _, name := range set.Names() {
				at := e.expiryOf(set.Get(name), seen)
				if !at.IsZero() && (soonest.IsZero() || at.Before(soonest)) {
					soonest = at
				}
			}
		}
	}
	e.byVersion = seen
	return soonest, !soonest.IsZero()
}

// expiryOf is r's chain's earliest expiry (zero if none), from the fleet
// read before when r was in it, and notes it in seen.
func (e *secretExpiries) expiryOf(r *snapshot.Resource, seen map[string]time.Time) time.Time {
	if at, ok := seen[r.Version]; ok {
		return at
	}
	at, ok := e.byVersion[r.Version]
	if !ok {
		if sec, isSecret := r.Message.(*tlsv3.Secret); isSecret {
			e.parses++
			at, _ = chainExpiry(sec.GetTlsCertificate().GetCertificateChain())
		}
	}
	seen[r.Version] = at
	return at
}

// maxChainCertificates bounds how many PEM blocks of one chain are read.
const maxChainCertificates = 64

// chainExpiry is the earliest NotAfter of the certificates inline in ds. A
// chain given as a file name is Envoy's to read, not Pylon's; blocks that
// are not certificates (a key pasted in by mistake) are skipped unparsed.
func chainExpiry(ds *corev3.DataSource) (time.Time, bool) {
	b := ds.GetInlineBytes()
	if b == nil {
		b = []byte(ds.GetInlineString())
	}
	var soonest time.Time
	for range maxChainCertificates {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && (soonest.IsZero() || c.NotAfter.Before(soonest)) {
			soonest = c.NotAfter
		}
	}
	return soonest, !soonest.IsZero()
}
