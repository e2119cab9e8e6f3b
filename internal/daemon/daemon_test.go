package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logged runs f with a logger and returns what it logged.
func logged(f func(log *slog.Logger)) string {
	var b bytes.Buffer
	f(slog.New(slog.NewTextHandler(&b, nil)))
	return b.String()
}

func TestExposure(t *testing.T) {
	plain := &security{}
	// The admin API beyond loopback without TLS is refused, and the error
	// says how to proceed.
	err := checkExposure(Options{}, plain, "127.0.0.1:18000", ":19000", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--admin-insecure") || !strings.Contains(err.Error(), "--admin-tls-cert") {
		t.Fatalf("admin on every interface without TLS: %v", err)
	}
	out := logged(func(log *slog.Logger) {
		if err := checkExposure(Options{AdminInsecure: true}, plain, "127.0.0.1:18000", "0.0.0.0:19000", log); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "admin API in plaintext") {
		t.Fatalf("--admin-insecure beyond loopback must warn:\n%s", out)
	}
	// Plaintext xDS beyond loopback warns; on loopback it does not.
	out = logged(func(log *slog.Logger) { _ = checkExposure(Options{}, plain, ":18000", "127.0.0.1:19000", log) })
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "xDS in plaintext") || !strings.Contains(out, "--xds-tls-cert") {
		t.Fatalf("plaintext xDS on every interface must warn:\n%s", out)
	}
	if out = logged(func(log *slog.Logger) { _ = checkExposure(Options{}, plain, "127.0.0.1:18000", "127.0.0.1:19000", log) }); out != "" {
		t.Fatalf("loopback only: want no warning, got\n%s", out)
	}
	out = logged(func(log *slog.Logger) {
		_ = checkExposure(Options{InsecureServeSecrets: true}, plain, "127.0.0.1:18000", "127.0.0.1:19000", log)
	})
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "INSECURE") {
		t.Fatalf("--insecure-serve-secrets must warn loudly:\n%s", out)
	}
}

func TestSecurityFlagErrors(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "ca")
	files := ca.Issue(t, certstest.Server("pylon")).Write(t, ca, dir, "server")
	withTLS := TLSFiles{Cert: files.Cert, Key: files.Key, ClientCA: files.CA}
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"identity without client CA", Options{NodeIdentity: "spiffe://example.org/ns/{cluster}/sa/{id}", XDSTLS: TLSFiles{Cert: files.Cert, Key: files.Key}}, "--node-identity needs --xds-client-ca"},
		{"bad identity", Options{NodeIdentity: "spiffe://{trust_domain}/{id}", XDSTLS: withTLS}, "--node-identity"},
		{"trust domain alone", Options{TrustDomain: "example.org"}, "--trust-domain"},
		{"require without CA", Options{XDSRequireClientCert: true}, "--xds-client-ca"},
		{"missing cert", Options{XDSTLS: TLSFiles{Cert: dir + "/nope.crt", Key: files.Key}}, "nope.crt"},
		{"admin key only", Options{AdminTLS: TLSFiles{Key: files.Key}}, "--admin-tls-cert"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadSecurity(c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to mention %q", err, c.want)
			}
		})
	}
	s, err := loadSecurity(Options{XDSTLS: withTLS, NodeIdentity: "spiffe://{trust_domain}/ns/{cluster}/sa/{id}", TrustDomain: "example.org"})
	if err != nil || s.xdsTLS == nil || s.identity == nil {
		t.Fatalf("good flags: %v", err)
	}
}

// Clients that send part of a request and stall are cut off within the
// admin server's bounds, at most MaxConns are served at once, and a
// well-behaved request still gets through.
func TestAdminServerBoundsStalledClients(t *testing.T) {
	limits := AdminLimits{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 400 * time.Millisecond, MaxConns: 8}
	limits.defaults()
	srv := newAdminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		fmt.Fprint(w, "ok")
	}), limits, nil, slog.New(slog.DiscardHandler))
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Counted under the bound: a connection counts from its accept to its
	// close, which comes before its slot is released.
	lis := &countingListener{Listener: raw}
	done := make(chan error, 1)
	go func() { done <- serveAdmin(srv, lis, limits) }()
	defer func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addr := lis.Addr().String()

	// 60 stalled clients: half stop inside their headers, half send a
	// request whose body never comes.
	const stalled = 60
	conns := make([]net.Conn, 0, stalled)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range stalled {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		partial := "GET /status HTTP/1.1\r\nHost: pylon\r\nX-Stall: "
		if i%2 == 1 {
			partial = "POST /v1/apply HTTP/1.1\r\nHost: pylon\r\nContent-Length: 1000\r\n\r\n{"
		}
		if _, err := io.WriteString(c, partial); err != nil {
			t.Fatal(err)
		}
	}

	// A well-behaved client gets its answer meanwhile.
	start := time.Now()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("a normal request failed while %d clients stalled: %v", stalled, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("normal request: %d", resp.StatusCode)
	}
	t.Logf("normal request answered after %v", time.Since(start))

	// Every stalled connection is closed by the server: 60 clients through
	// 8 slots of at most 400ms each take about 3s; 10s is the bound.
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	var notClosed atomic.Int64
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(deadline)
			_, err := io.Copy(io.Discard, bufio.NewReader(c))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				notClosed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := notClosed.Load(); n > 0 {
		t.Fatalf("%d stalled connections still open after 10s", n)
	}
	if m := lis.most.Load(); m > int64(limits.MaxConns) {
		t.Fatalf("%d connections served at once, want at most %d", m, limits.MaxConns)
	}
}

// countingListener counts its open connections and their maximum.
type countingListener struct {
	net.Listener
	open, most atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for m := l.most.Load(); n > m && !l.most.CompareAndSwap(m, n); m = l.most.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// A token file is created 0600 and only once; an existing one that others
// can read, or a link planted at its path, is refused, not used.
func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	path, read := filepath.Join(dir, "admin-token"), filepath.Join(dir, "read-token")
	files, err := loadTokens(Options{TokenFile: path, ReadTokenFile: read})
	if err != nil {
		t.Fatal(err)
	}
	tok := files.Current()
	if len(tok.Write) != 64 || len(tok.Read) != 64 {
		t.Fatalf("generated tokens %q %q", tok.Write, tok.Read)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode: %v %v", fi.Mode(), err)
	}
	if again, err := loadTokens(Options{TokenFile: path, ReadTokenFile: read}); err != nil || again.Current() != tok {
		t.Fatalf("second start read %v, %v; want the same tokens", again, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadTokens(Options{TokenFile: path, ReadTokenFile: read}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable token file was used: %v", err)
	}
	target := filepath.Join(dir, "elsewhere")
	link := filepath.Join(dir, "planted-token")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadTokens(Options{TokenFile: path, ReadTokenFile: link}); err == nil {
		t.Fatal("a token was written through a planted link")
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was created: %v", err)
	}
}

// The default secret directory is never the file system's root.
func TestDefaultSecretDirNeverRoot(t *testing.T) {
	if dir, err := defaultSecretDir("/"); err != nil || dir != "" {
		t.Fatalf("config folder /: got %q, %v; want none", dir, err)
	}
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "pylon.yaml")
	if err := os.WriteFile(cfg, []byte("resources: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if dir, err := defaultSecretDir(cfg); err != nil || dir != cfgDir {
		t.Fatalf("config file: got %q, %v; want %s", dir, err, cfgDir)
	}
	t.Chdir("/")
	if dir, err := defaultSecretDir(""); err != nil || dir != "" {
		t.Fatalf("store mode in /: got %q, %v; want none", dir, err)
	}
}

// Idle keep-alive connections hold slots too: clients that make one
// request and then idle on every slot keep a new client (a readiness
// probe) out only until the idle timeout (set short here; the default is
// longer than clients keep connections, and the connection cap is what
// bounds idling clients).
func TestAdminServerIdleClientsLetGo(t *testing.T) {
	limits := AdminLimits{MaxConns: 4, IdleTimeout: 3 * time.Second}
	limits.defaults()
	srv := newAdminServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }), limits, nil, slog.New(slog.DiscardHandler))
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveAdmin(srv, raw, limits) }()
	defer func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addr := raw.Addr().String()
	for range limits.MaxConns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: pylon\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
		// The connection now idles, keep-alive, holding its slot.
	}
	// Within 10s: the idle bound.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("a new client was kept out by idle ones: %v", err)
	}
	resp.Body.Close()
}
