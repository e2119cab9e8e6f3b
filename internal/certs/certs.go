// Package certs serves TLS from certificate files that are rotated on disk:
// a server certificate and key, and optionally a client CA bundle, re-read
// when the files change, without restarting the listener or dropping the
// connections already open.
//
// Files are checked at most once per CheckEvery, on a handshake and, while
// Run runs, on its own clock: a rotation of the client CAs then takes
// effect without waiting for a client to connect, and Run reports it, so
// that connections verified against the old CAs are verified again. A
// rotation writes the certificate and the
// key at different moments, so a pair that does not match (or a file that is
// half written) is not an error: the last good pair keeps serving, the bad
// one is logged once, and the next check tries again.
package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// MaxFileSize bounds each certificate, key or CA file read: a real bundle is
// a few kilobytes; a path pointing at something huge must not be read whole.
const MaxFileSize = 1 << 20

// Options describes a TLS server identity.
type Options struct {
	// What the files are for, in logs and errors ("xds", "admin").
	Name string
	// CertFile and KeyFile hold the server's PEM certificate chain and key.
	CertFile, KeyFile string
	// ClientCAFile, if set, holds the PEM CAs client certificates are
	// verified against. A client certificate is then checked when given;
	// RequireClientCert refuses a handshake without one.
	ClientCAFile      string
	RequireClientCert bool
	// NextProtos are the ALPN protocols offered ("h2" for gRPC).
	NextProtos []string
	// CheckEvery bounds how often the files are checked for changes
	// (default 1s).
	CheckEvery time.Duration
	Logger     *slog.Logger
	// Now is the clock (default time.Now); tests inject one.
	Now func() time.Time
}

// Server is a TLS server config whose certificate and client CAs follow
// their files.
type Server struct {
	o       Options
	log     *slog.Logger
	current atomic.Pointer[tls.Config]

	mu        sync.Mutex // held while checking the files
	nextCheck time.Time
	seen      stamps // the files as last read, good or bad
	// caChanged holds a signal for Run when a reload changed the client
	// CAs (one slot: Run reads the newest pool, not each change).
	caChanged chan struct{}
}

// New loads the files once; unlike a later rotation, a bad file at start is
// an error, so a typo cannot start a server without TLS.
func New(o Options) (*Server, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, fmt.Errorf("%s TLS: a certificate file and a key file are both required", o.Name)
	}
	if o.RequireClientCert && o.ClientCAFile == "" {
		return nil, fmt.Errorf("%s TLS: requiring client certificates needs a client CA file to verify them", o.Name)
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, log: o.Logger, caChanged: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	st := s.stat()
	cfg, err := s.load()
	if err != nil {
		return nil, err
	}
	s.current.Store(cfg)
	s.seen = st
	s.nextCheck = o.Now().Add(o.CheckEvery)
	return s, nil
}

// Config is the tls.Config to serve with: each handshake takes the newest
// good certificate and client CAs.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: s.o.NextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s.maybeReload()
			return s.current.Load(), nil
		},
	}
}

// Run checks the files every CheckEvery until ctx ends, and calls
// onClientCAs (if not nil), from Run's goroutine, with the new client CA
// pool each time a reload changed it, whether Run's check or a
// handshake's found the change: the caller verifies the connections
// already open against it (a handshake's check must not wait on that).
// It returns nil when ctx ends.
func (s *Server) Run(ctx context.Context, onClientCAs func(*x509.CertPool)) error {
	tick := time.NewTicker(s.o.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			s.check(true)
		case <-s.caChanged:
			if onClientCAs != nil {
				onClientCAs(s.current.Load().ClientCAs)
			}
		}
	}
}

// ClientCAs returns the client CA pool being verified against (nil
// without a client CA file).
func (s *Server) ClientCAs() *x509.CertPool { return s.current.Load().ClientCAs }

// Certificate returns the certificate being served.
func (s *Server) Certificate() *x509.Certificate {
	return s.current.Load().Certificates[0].Leaf
}

// Expiry returns when the chain being served stops verifying: the
// earliest NotAfter of its certificates (the leaf and what is served
// after it). It parses the chain each call: a scrape's cost, a few
// certificates.
func (s *Server) Expiry() time.Time {
	pair := s.current.Load().Certificates[0]
	end := pair.Leaf.NotAfter
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil && c.NotAfter.Before(end) {
			end = c.NotAfter
		}
	}
	return end
}

// maybeReload re-reads the files if one changed since the last read, at most
// once per CheckEvery. A handshake that finds another one checking does not
// wait: it serves the current pair.
func (s *Server) maybeReload() { s.check(false) }

// check re-reads the files if one changed; unless due (Run's tick), only
// when CheckEvery has passed since the last check.
func (s *Server) check(due bool) {
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	now := s.o.Now()
	if !due && now.Before(s.nextCheck) {
		return
	}
	s.nextCheck = now.Add(s.o.CheckEvery)
	st := s.stat()
	if st.equal(s.seen) {
		return
	}
	s.seen = st
	cfg, err := s.load()
	if err != nil {
		// Logged once per state of the files: the next change tries again.
		// The error names files and reasons, never their contents.
		s.log.Warn("TLS files changed but cannot be used; still serving the previous certificate", "server", s.o.Name, "err", err)
		return
	}
	prev := s.current.Swap(cfg)
	if cfg.ClientCAs != nil && !cfg.ClientCAs.Equal(prev.ClientCAs) {
		s.log.Info("TLS client CAs reloaded: open connections are verified again", "server", s.o.Name, "client_ca_file", s.o.ClientCAFile)
		select {
		case s.caChanged <- struct{}{}:
		default:
		}
	}
	leaf := cfg.Certificates[0].Leaf
	s.log.Info("TLS certificate reloaded", "server", s.o.Name, "cert_file", s.o.CertFile,
		"subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
}

// load reads the files into a complete server config.
func (s *Server) load() (*tls.Config, error) {
	certPEM, err := ReadBounded(s.o.CertFile)
	if err != nil {
		return nil, fmt.Errorf("%s TLS certificate: %w", s.o.Name, err)
	}
	keyPEM, err := ReadBounded(s.o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s TLS key: %w", s.o.Name, err)
	}
	// tls.X509KeyPair's errors describe the PEM blocks, not their bytes.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s TLS: certificate %s and key %s: %w", s.o.Name, s.o.CertFile, s.o.KeyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: cipherSuites,
		NextProtos:   s.o.NextProtos,
		Certificates: []tls.Certificate{pair},
	}
	if s.o.ClientCAFile != "" {
		pool, err := loadPool(s.o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s TLS client CA: %w", s.o.Name, err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if s.o.RequireClientCert {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

// cipherSuites are the TLS 1.2 suites offered: forward secret AEADs only.
// (TLS 1.3's suites are not configurable and all sound.)
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// LoadPool reads a PEM bundle of CA certificates.
func LoadPool(path string) (*x509.CertPool, error) { return loadPool(path) }

func loadPool(path string) (*x509.CertPool, error) {
	b, err := ReadBounded(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate found", path)
	}
	return pool, nil
}

// ReadBounded reads a certificate or key file of at most MaxFileSize
// bytes, refusing an empty one: the server's files and the built-in CA's
// (internal/ca) are read alike.
func ReadBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileSize)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errEmpty)
	}
	return b, nil
}

var errEmpty = errors.New("empty file")

// stamps identify the files' contents cheaply: a rename over the file
// changes its inode, an in-place write its size or modification time.
type stamps [3]os.FileInfo

func (s *Server) stat() stamps {
	var st stamps
	for i, p := range []string{s.o.CertFile, s.o.KeyFile, s.o.ClientCAFile} {
		if p != "" {
			st[i], _ = os.Stat(p)
		}
	}
	return st
}

func (a stamps) equal(b stamps) bool {
	for i := range a {
		x, y := a[i], b[i]
		if x == nil || y == nil {
			if x != y {
				return false
			}
			continue
		}
		if !os.SameFile(x, y) || !x.ModTime().Equal(y.ModTime()) || x.Size() != y.Size() {
			return false
		}
	}
	return true
}

// VerifyClient verifies a client's certificates (leaf first, then what
// it offered as intermediates) against pool at now, as crypto/tls's
// server handshake does, returning the verified chains: what a
// connection verified at its handshake is verified again after the
// client CAs changed, or on a later request.
func VerifyClient(sent []*x509.Certificate, pool *x509.CertPool, now time.Time) ([][]*x509.Certificate, error) {
	if len(sent) == 0 {
		return nil, errors.New("no client certificate")
	}
	if pool == nil {
		// x509 would verify against the system's roots: trust nothing.
		pool = x509.NewCertPool()
	}
	opts := x509.VerifyOptions{
		Roots:         pool,
		CurrentTime:   now,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, cert := range sent[1:] {
		opts.Intermediates.AddCert(cert)
	}
	return sent[0].Verify(opts)
}

// Expiry is when the last of chains stops verifying: a chain is good
// until the first of its certificates expires.
func Expiry(chains [][]*x509.Certificate) time.Time {
	var latest time.Time
	for _, chain := range chains {
		if len(chain) == 0 {
			continue
		}
		end := chain[0].NotAfter
		for _, cert := range chain[1:] {
			if cert.NotAfter.Before(end) {
				end = cert.NotAfter
			}
		}
		if end.After(latest) {
			latest = end
		}
	}
	return latest
}

// Expired reports whether a VerifyClient error is the expiry of a
// certificate of the chain (rather than an untrusted or unfit one).
func Expired(err error) bool {
	var invalid x509.CertificateInvalidError
	return errors.As(err, &invalid) && invalid.Reason == x509.Expired
}

// Reload re-reads the files now, changed or not, rather than at the first
// handshake past CheckEvery (the daemon's SIGHUP). A bad file keeps the
// current pair, as in a rotation.
func (s *Server) Reload() {
	s.mu.Lock()
	s.nextCheck, s.seen = time.Time{}, stamps{}
	s.mu.Unlock()
	s.maybeReload()
}
