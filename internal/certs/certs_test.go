package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a manual clock: the files are checked only when a test moves it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// safeBuffer is a log sink shared by the handshake goroutines and the test.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *safeBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// serve runs a TLS listener on loopback with cfg until the test ends; each
// connection completes its handshake and is closed.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
				if tc.Handshake() == nil {
					// Wait for the client to close, so that it sees the
					// handshake's outcome (TLS 1.3 verifies the client
					// certificate after the client's Finished).
					_, _ = tc.Read(make([]byte, 1))
				}
			}()
		}
	}()
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	return lis.Addr().String()
}

// handshake connects with client and returns the server's leaf certificate,
// or the handshake's error.
func handshake(t *testing.T, addr string, client *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, client)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// With TLS 1.3 a refused client certificate shows on the first read.
	if _, err := c.Write([]byte{0}); err != nil {
		return nil, err
	}
	if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "EOF") {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

type fixture struct {
	dir   string
	ca    *certstest.CA
	files certstest.Files
	clk   *clock
	logs  *safeBuffer
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "test-ca")
	f := &fixture{dir: dir, ca: ca, clk: &clock{now: time.Unix(1000, 0)}, logs: &safeBuffer{}}
	f.files = ca.Issue(t, certstest.Server("first")).Write(t, ca, dir, "server")
	return f
}

func (f *fixture) options() Options {
	return Options{
		Name: "xds", CertFile: f.files.Cert, KeyFile: f.files.Key,
		CheckEvery: time.Second, Now: f.clk.Now,
		Logger: slog.New(slog.NewTextHandler(f.logs, nil)),
	}
}

func (f *fixture) client() *tls.Config {
	return &tls.Config{RootCAs: certstest.Pool(f.ca), ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

func mustHandshake(t *testing.T, addr string, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	leaf, err := handshake(t, addr, cfg)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return leaf
}

// A rotation renamed over the files is served by the next handshake once
// the check interval has passed; not before (the check is throttled).
func TestRotationServedByNextHandshake(t *testing.T) {
	f := newFixture(t)
	s, err := New(f.options())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	if cn := mustHandshake(t, addr, f.client()).Subject.CommonName; cn != "first" {
		t.Fatalf("serving %q, want first", cn)
	}
	f.ca.Issue(t, certstest.Server("second")).Write(t, f.ca, f.dir, "server")
	if cn := mustHandshake(t, addr, f.client()).Subject.CommonName; cn != "first" {
		t.Fatalf("files checked before the interval passed: serving %q", cn)
	}
	f.clk.Advance(time.Second)
	if cn := mustHandshake(t, addr, f.client()).Subject.CommonName; cn != "second" {
		t.Fatalf("after rotation serving %q, want second", cn)
	}
	if s.Certificate().Subject.CommonName != "second" {
		t.Fatal("Certificate() does not follow the rotation")
	}
	if !strings.Contains(f.logs.String(), "TLS certificate reloaded") {
		t.Fatalf("rotation not logged: %s", f.logs)
	}
}

// The certificate written before its key: the old pair keeps serving, the
// mismatch is logged once (not per handshake, and never with the key), and
// the new pair is served once the key arrives.
func TestHalfWrittenRotationKeepsLastGoodPair(t *testing.T) {
	f := newFixture(t)
	s, err := New(f.options())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	next := f.ca.Issue(t, certstest.Server("second"))
	certstest.WriteFile(t, f.files.Cert, next.CertPEM)
	for range 3 {
		f.clk.Advance(time.Second)
		if cn := mustHandshake(t, addr, f.client()).Subject.CommonName; cn != "first" {
			t.Fatalf("half a rotation served %q, want the last good pair", cn)
		}
	}
	logs := f.logs.String()
	if n := strings.Count(logs, "cannot be used"); n != 1 {
		t.Fatalf("bad pair logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, f.files.Cert) || !strings.Contains(logs, "private key does not match") {
		t.Fatalf("the warning should name the files and the reason:\n%s", logs)
	}
	certstest.WriteFile(t, f.files.Key, next.KeyPEM)
	f.clk.Advance(time.Second)
	if cn := mustHandshake(t, addr, f.client()).Subject.CommonName; cn != "second" {
		t.Fatalf("complete rotation served %q, want second", cn)
	}
	assertNoKey(t, f.logs.String(), next.KeyPEM)
}

func assertNoKey(t *testing.T, text string, keyPEM []byte) {
	t.Helper()
	body := strings.Split(string(keyPEM), "\n")[1] // the first base64 line
	if strings.Contains(text, body) || strings.Contains(text, "PRIVATE KEY") {
		t.Fatalf("key material in output:\n%s", text)
	}
}

// With a client CA, a client certificate is verified when given; with
// RequireClientCert it must be given. The CA bundle rotates like the pair.
func TestClientCertificates(t *testing.T) {
	f := newFixture(t)
	other := certstest.NewCA(t, "other-ca")
	good := f.ca.Issue(t, certstest.Client("spiffe://example.org/ns/a/sa/b")).TLS(t)
	foreign := other.Issue(t, certstest.Client("spiffe://example.org/ns/a/sa/b")).TLS(t)
	with := func(c tls.Certificate) *tls.Config {
		// Always present c: a client given Certificates sends none that the
		// server's acceptable CAs do not list, which would test nothing.
		cfg := f.client()
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
		return cfg
	}

	o := f.options()
	o.ClientCAFile = f.files.CA
	optional, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, optional.Config())
	mustHandshake(t, addr, f.client())
	mustHandshake(t, addr, with(good))
	if _, err := handshake(t, addr, with(foreign)); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}

	o.RequireClientCert = true
	required, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	addr = serve(t, required.Config())
	if _, err := handshake(t, addr, f.client()); err == nil {
		t.Fatal("no client certificate accepted although required")
	}
	mustHandshake(t, addr, with(good))

	// The client CA rotates to the other CA.
	certstest.WriteFile(t, f.files.CA, other.PEM)
	f.clk.Advance(time.Second)
	mustHandshake(t, addr, with(foreign))
	if _, err := handshake(t, addr, with(good)); err == nil {
		t.Fatal("the old CA's client still accepted after the CA rotated")
	}
}

// Old protocol versions are refused.
func TestRefusesTLS11(t *testing.T) {
	f := newFixture(t)
	s, err := New(f.options())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	old := f.client()
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := handshake(t, addr, old); err == nil {
		t.Fatal("TLS 1.1 handshake succeeded")
	}
	tls12 := f.client()
	tls12.MaxVersion = tls.VersionTLS12
	mustHandshake(t, addr, tls12)
}

// Bad files at start are errors naming the file; none echoes the key.
func TestStartErrors(t *testing.T) {
	f := newFixture(t)
	other := f.ca.Issue(t, certstest.Server("other"))
	mismatched := filepath.Join(f.dir, "other.key")
	certstest.WriteFile(t, mismatched, other.KeyPEM)
	huge := filepath.Join(f.dir, "huge.crt")
	certstest.WriteFile(t, huge, bytes.Repeat([]byte("A"), MaxFileSize+1))
	notCA := filepath.Join(f.dir, "not-ca.pem")
	certstest.WriteFile(t, notCA, []byte("hello\n"))
	for _, c := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no key", func(o *Options) { o.KeyFile = "" }, "both required"},
		{"missing", func(o *Options) { o.CertFile = filepath.Join(f.dir, "nope.crt") }, "nope.crt"},
		{"mismatch", func(o *Options) { o.KeyFile = mismatched }, "private key does not match"},
		{"huge", func(o *Options) { o.CertFile = huge }, "larger than"},
		{"require without CA", func(o *Options) { o.RequireClientCert = true }, "client CA"},
		{"CA without certificates", func(o *Options) { o.ClientCAFile = notCA }, "not-ca.pem: no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := f.options()
			c.edit(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to mention %q", err, c.want)
			}
			assertNoKey(t, err.Error(), other.KeyPEM)
		})
	}
}

// Finding 5 (issue 30): Run notices a rotation on its own clock, without
// a handshake, and reports each change of the client CAs (not of the
// server's pair) with the new pool, so that open connections can be
// verified again.
func TestRunReportsClientCAChanges(t *testing.T) {
	f := newFixture(t)
	other := certstest.NewCA(t, "other-ca")
	o := f.options()
	o.ClientCAFile, o.CheckEvery = f.files.CA, 10*time.Millisecond
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pools := make(chan *x509.CertPool, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(p *x509.CertPool) { pools <- p }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// The server's pair rotates, then the client CAs: the first report is
	// the CAs'.
	f.ca.Issue(t, certstest.Server("second")).Write(t, f.ca, f.dir, "pair")
	certstest.WriteFile(t, f.files.Cert, readFile(t, filepath.Join(f.dir, "pair.crt")))
	certstest.WriteFile(t, f.files.Key, readFile(t, filepath.Join(f.dir, "pair.key")))
	deadline := time.Now().Add(5 * time.Second)
	for s.Certificate().Subject.CommonName != "second" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if cn := s.Certificate().Subject.CommonName; cn != "second" {
		t.Fatalf("Run did not reload the pair: serving %q", cn)
	}
	certstest.WriteFile(t, f.files.CA, other.PEM)
	select {
	case p := <-pools:
		if !p.Equal(certstest.Pool(other)) {
			t.Fatal("the reported pool is not the new client CAs")
		}
		if !s.ClientCAs().Equal(p) {
			t.Fatal("ClientCAs is not the reported pool")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no client CA change reported within 5s")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A connection's certificate stops verifying when the first certificate
// of its chain expires, or, with several chains, when the last chain does.
func TestExpiry(t *testing.T) {
	at := func(h int) *x509.Certificate {
		return &x509.Certificate{NotAfter: time.Date(2030, 1, 1, h, 0, 0, 0, time.UTC)}
	}
	for _, c := range []struct {
		chains [][]*x509.Certificate
		want   int
	}{
		{[][]*x509.Certificate{{at(5), at(9)}}, 5},
		{[][]*x509.Certificate{{at(9), at(3)}}, 3},
		{[][]*x509.Certificate{{at(9), at(3)}, {at(9), at(7), at(8)}}, 7},
	} {
		if got := Expiry(c.chains); got.Hour() != c.want {
			t.Errorf("%d chains: expire at %v, want hour %d", len(c.chains), got, c.want)
		}
	}
}

// VerifyClient verifies as the handshake does: the client CAs, the time,
// client auth usage; a nil pool trusts nothing (never the system's roots).
func TestVerifyClient(t *testing.T) {
	ca, other := certstest.NewCA(t, "clients"), certstest.NewCA(t, "other")
	client := ca.Issue(t, certstest.Client("spiffe://example.org/ns/a/sa/b")).Cert
	server := ca.Issue(t, certstest.Server("not-a-client")).Cert
	now := time.Now()
	if _, err := VerifyClient([]*x509.Certificate{client}, certstest.Pool(ca), now); err != nil {
		t.Fatalf("a client certificate of the pool's CA: %v", err)
	}
	for name, c := range map[string]struct {
		cert    *x509.Certificate
		pool    *x509.CertPool
		at      time.Time
		expired bool
	}{
		"another CA":         {client, certstest.Pool(other), now, false},
		"nil pool":           {client, nil, now, false},
		"server usage only":  {server, certstest.Pool(ca), now, false},
		"after its NotAfter": {client, certstest.Pool(ca), client.NotAfter.Add(time.Second), true},
	} {
		_, err := VerifyClient([]*x509.Certificate{c.cert}, c.pool, c.at)
		if err == nil || Expired(err) != c.expired {
			t.Errorf("%s: %v (expired %v), want an error, expired %v", name, err, Expired(err), c.expired)
		}
	}
}

// Expiry is the earliest NotAfter of the chain being served, intermediates
// included, and follows a rotation.
func TestServedExpiryIsTheChainsEarliest(t *testing.T) {
	f := newFixture(t)
	// The leaf outlives the CA certificate served after it: the chain
	// stops verifying when the CA's ends.
	l := certstest.Server("long")
	l.NotAfter = time.Now().Add(72 * time.Hour).Truncate(time.Second)
	long := f.ca.Issue(t, l)
	certstest.WriteFile(t, f.files.Cert, append(append([]byte{}, long.CertPEM...), f.ca.PEM...))
	certstest.WriteFile(t, f.files.Key, long.KeyPEM)
	s, err := New(f.options())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Expiry(), f.ca.Cert.NotAfter; !got.Equal(want) {
		t.Fatalf("Expiry() %v, want the CA certificate's %v (the chain's earliest)", got, want)
	}

	l.NotAfter = time.Now().Add(2 * time.Hour).Truncate(time.Second)
	short := f.ca.Issue(t, l)
	short.Write(t, f.ca, f.dir, "server")
	s.Reload()
	if got, want := s.Expiry(), short.Cert.NotAfter; !got.Equal(want) {
		t.Fatalf("after a rotation Expiry() %v, want the new leaf's %v", got, want)
	}
}
