package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CertKind is what a certificate is to Pylon: the one label of
// pylon_certificate_expiry_seconds. A fixed few, never a name.
type CertKind int

const (
	// CertSecret: the TLS certificates of the Secrets the fleet serves.
	CertSecret CertKind = iota
	// CertServer: Pylon's own serving certificates (xDS and admin).
	CertServer
	// CertClient: the client certificates of the open xDS connections.
	CertClient
	certKinds
)

var certKindLabels = [certKinds]string{CertSecret: "secret", CertServer: "server", CertClient: "client"}

// ExpirySource reports the earliest expiry among the certificates of a
// kind, and false when there is none to report. It is called at every
// scrape, so it must be cheap and safe to call from any goroutine.
type ExpirySource func() (time.Time, bool)

// certExpiry is pylon_certificate_expiry_seconds: each kind's earliest
// expiry, read from its source when scraped, as seconds from now.
type certExpiry struct {
	sources [certKinds]atomic.Pointer[ExpirySource]
}

const certExpiryName = "pylon_certificate_expiry_seconds"

var certExpiryDesc = prometheus.NewDesc(certExpiryName,
	"Seconds until the earliest expiry (NotAfter) among certificates of a kind: secret (the TLS certificates of the Secrets served), "+
		"server (Pylon's own xDS and admin certificates, their chains included), client (the client certificates of open xDS connections). "+
		"Negative once expired; no series for a kind with none.",
	[]string{"kind"}, nil)

func (c *certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

func (c *certExpiry) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for k := range certKinds {
		src := c.sources[k].Load()
		if src == nil {
			continue
		}
		if at, ok := (*src)(); ok {
			ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, at.Sub(now).Seconds(), certKindLabels[k])
		}
	}
}

// CertificateExpiry sets where the expiry of kind's certificates is read
// from (nil: nowhere, no series). A kind outside the fixed few is ignored.
func (m *Metrics) CertificateExpiry(kind CertKind, earliest ExpirySource) {
	if kind < 0 || kind >= certKinds {
		return
	}
	if earliest == nil {
		m.expiry.sources[kind].Store(nil)
		return
	}
	m.expiry.sources[kind].Store(&earliest)
}
