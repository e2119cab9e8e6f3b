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
// scrape after it.
func secretExpiry(pub *fleet.Publisher) metrics.ExpirySource {
	var (
		mu     sync.Mutex
		of     *fleet.Fleet
		at     time.Time
		served bool
	)
	return func() (time.Time, bool) {
		f := pub.Current()
		mu.Lock()
		defer mu.Unlock()
		if f != of {
			of = f
			at, served = fleetSecretExpiry(f)
		}
		return at, served
	}
}

// fleetSecretExpiry is the earliest expiry among f's Secrets' certificate
// chains, and false when f serves none.
func fleetSecretExpiry(f *fleet.Fleet) (time.Time, bool) {
	if f == nil {
		return time.Time{}, false
	}
	var soonest time.Time
	for _, g := range f.Groups() {
		snaps := []*snapshot.Snapshot{g.Snapshot}
		if prev, _ := f.Previous(g.Name); prev != nil {
			snaps = append(snaps, prev)
		}
		for _, s := range snaps {
			set := s.Set(xdstype.SecretURL)
			for _, name := range set.Names() {
				sec, ok := set.Get(name).Message.(*tlsv3.Secret)
				if !ok {
					continue
				}
				if at, ok := chainExpiry(sec.GetTlsCertificate().GetCertificateChain()); ok && (soonest.IsZero() || at.Before(soonest)) {
					soonest = at
				}
			}
		}
	}
	return soonest, !soonest.IsZero()
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
