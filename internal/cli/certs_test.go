package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// certsConfig serves one Secret, made by `pylon certs` too, to the nodes
// of cluster edge.
const certsConfig = `services:
- { name: web, endpoints: [{ address: 127.0.0.1, port: 8080 }] }
routes:
- { name: web, virtual_hosts: [{ name: web, domains: ["*"], routes: [{ to: [{ service: web }] }] }] }
listeners:
- { name: https, address: 127.0.0.1, port: 8443, routes: web, tls: { secret: app-cert } }
secrets:
- { name: app-cert, cert_file: app.pem, key_file: app-key.pem }
`

// mustCerts runs `pylon certs ...` and returns what it printed, failing on
// a non-zero exit or on anything that looks like a key in its output.
func mustCerts(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := run(append([]string{"certs"}, args...)...)
	if code != 0 {
		t.Fatalf("pylon certs %v: exit %d: %s", args, code, stderr)
	}
	if strings.Contains(out+stderr, "PRIVATE KEY") {
		t.Fatalf("pylon certs %v printed a key:\n%s%s", args, out, stderr)
	}
	return out
}

// A Pylon started with certificates from `pylon certs` alone serves a
// node its Secret over mutual TLS, and refuses a certificate issued for
// another node with PermissionDenied.
func TestCertsHandshakeWithServe(t *testing.T) {
	dir := t.TempDir()
	mustCerts(t, "init", "--dir", dir, "--trust-domain", "example.org")
	mustCerts(t, "issue", "--server", "--dir", dir, "--dns", "localhost", "--ip", "127.0.0.1")
	mustCerts(t, "issue", "--server", "--dir", dir, "--dns", "app.example.com", "--name", "app")
	out := mustCerts(t, "issue", "--dir", dir, "--node-id", "edge-1", "--cluster", "edge")
	if !strings.Contains(out, "spiffe://example.org/ns/edge/sa/edge-1") {
		t.Errorf("issue does not say which identity the certificate proves:\n%s", out)
	}
	mustCerts(t, "issue", "--dir", dir, "--node-id", "edge-2", "--cluster", "edge")
	cfg := filepath.Join(dir, "pylon.yaml")
	if err := os.WriteFile(cfg, []byte(certsConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := serveXDS(t, "--config", cfg,
		"--xds-tls-cert", filepath.Join(dir, "server.pem"), "--xds-tls-key", filepath.Join(dir, "server-key.pem"),
		"--xds-client-ca", filepath.Join(dir, "ca.pem"), "--xds-require-client-cert",
		"--node-identity", "spiffe://{trust_domain}/ns/{cluster}/sa/{id}", "--trust-domain", "example.org")

	dial := func(id string) *tls.Config {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
		if err != nil || !pool.AppendCertsFromPEM(caPEM) {
			t.Fatalf("ca.pem: %v", err)
		}
		return &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	}
	node := xdstest.Node("edge-1")
	node.Cluster = "edge"
	s := xdstest.OpenADS(t, xdstest.DialTLS(t, addr, dial("edge-1")), node)
	s.Request(xdstype.SecretURL, "app-cert")
	if resp := s.RecvType(xdstype.SecretURL); len(resp.Resources) != 1 {
		t.Fatalf("edge-1 with its own certificate got %d Secrets, want app-cert", len(resp.Resources))
	}
	s.Close()

	err := xdstest.StreamErr(xdstest.DialTLS(t, addr, dial("edge-2")), node)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "this one proves spiffe://example.org/ns/edge/sa/edge-2") {
		t.Fatalf("edge-2's certificate claiming edge-1: %v, want PermissionDenied", err)
	}
}

// serveXDS runs `pylon serve` with args until the test ends and returns
// its xDS address.
func serveXDS(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	all := append([]string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json"}, args...)
	go func() {
		done <- Execute(ctx, all, io.Discard, pw)
		pw.Close()
	}()
	var addr string
	var log strings.Builder
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		var rec map[string]any
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec["msg"] == "pylon serving" {
			addr, _ = rec["xds"].(string)
			break
		}
		if log.Len() < 64<<10 {
			log.Write(lines.Bytes())
			log.WriteByte('\n')
		}
	}
	drained := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, pr); close(drained) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
		<-drained
	})
	if addr == "" {
		cancel()
		code := <-done
		done <- code // for the cleanup
		t.Fatalf("serve never logged its addresses (exit %d):\n%s", code, log.String())
	}
	return addr
}

// Keys are written readable by their owner alone, and never printed.
func TestCertsKeyFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	outs := mustCerts(t, "init", "--dir", dir, "--trust-domain", "example.org") +
		mustCerts(t, "issue", "--dir", dir, "--node-id", "edge-1", "--cluster", "edge") +
		mustCerts(t, "issue", "--server", "--dir", dir, "--dns", "localhost")
	for _, name := range []string{"ca-key.pem", "edge-1-key.pem", "server-key.pem"} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", name, fi, err)
			continue
		}
		b, _ := os.ReadFile(p)
		body := strings.Join(strings.Split(string(b), "\n")[1:3], "")
		if len(body) < 40 || strings.Contains(strings.ReplaceAll(outs, "\n", ""), body[:40]) {
			t.Errorf("%s: shown in the output:\n%s", name, outs)
		}
	}
}

// An existing file is never replaced without --force.
func TestCertsNoOverwriteWithoutForce(t *testing.T) {
	dir := t.TempDir()
	mustCerts(t, "init", "--dir", dir, "--trust-domain", "example.org")
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if code, _, stderr := run("certs", "init", "--dir", dir); code != 1 || !strings.Contains(stderr, "ca.pem") || !strings.Contains(stderr, "--force") {
		t.Fatalf("second init: exit %d, %q", code, stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(now) != string(caPEM) {
		t.Fatal("a refused init changed ca.pem")
	}
	mustCerts(t, "issue", "--dir", dir, "--node-id", "edge-1", "--cluster", "edge")
	before, _ := os.ReadFile(filepath.Join(dir, "edge-1.pem"))
	if code, _, stderr := run("certs", "issue", "--dir", dir, "--node-id", "edge-1", "--cluster", "edge"); code != 1 || !strings.Contains(stderr, "edge-1.pem") {
		t.Fatalf("second issue: exit %d, %q", code, stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "edge-1.pem")); string(now) != string(before) {
		t.Fatal("a refused issue changed edge-1.pem")
	}
	mustCerts(t, "issue", "--dir", dir, "--node-id", "edge-1", "--cluster", "edge", "--force")
	if now, _ := os.ReadFile(filepath.Join(dir, "edge-1.pem")); string(now) == string(before) {
		t.Fatal("--force did not replace edge-1.pem")
	}
	mustCerts(t, "init", "--dir", dir, "--trust-domain", "example.org", "--force")
}

// A node id the rule cannot bind is refused with the server's own words.
func TestCertsRefusesUnbindableNodeID(t *testing.T) {
	dir := t.TempDir()
	mustCerts(t, "init", "--dir", dir, "--trust-domain", "example.org")
	for _, c := range []struct{ template, id string }{
		{"spiffe://{trust_domain}/ns/{cluster}/sa/{id}", "a/b"},
		{"{id}.{cluster}.proxies.example.com", "Edge-1"},
		{"{id}.{cluster}.proxies.example.com", "a.b"},
	} {
		rule, err := identity.ParseRule(c.template, "example.org")
		if err != nil {
			t.Fatal(err)
		}
		_, want := rule.Want(c.id, "edge")
		code, out, stderr := run("certs", "issue", "--dir", dir, "--node-id", c.id, "--cluster", "edge", "--node-identity", c.template)
		if code != 1 || want == nil || !strings.Contains(stderr, want.Error()) {
			t.Errorf("%s as %q: exit %d, %q %q; want the server's %v", c.id, c.template, code, out, stderr, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("refused issues left files: %v", entries)
	}
}

// A DNS rule's certificate carries the DNS name the server checks.
func TestCertsIssueDNSRule(t *testing.T) {
	dir := t.TempDir()
	mustCerts(t, "init", "--dir", dir)
	mustCerts(t, "issue", "--dir", dir, "--node-id", "edge-1", "--cluster", "edge", "--node-identity", "{id}.{cluster}.proxies.example.com")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "edge-1.pem"), filepath.Join(dir, "edge-1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "edge-1.edge.proxies.example.com" || len(leaf.URIs) != 0 {
		t.Fatalf("DNS %v, URIs %v", leaf.DNSNames, leaf.URIs)
	}
	// Without a trust domain, the SPIFFE default has none to fill in.
	if code, _, stderr := run("certs", "issue", "--dir", dir, "--node-id", "edge-2", "--cluster", "edge"); code != 1 || !strings.Contains(stderr, "no trust domain") {
		t.Fatalf("SPIFFE rule without a trust domain: exit %d, %q", code, stderr)
	}
}

// The `pylon certs` commands the docs show run as written, and so does the
// security guide's walk-through: a serve on what they made, a bootstrap,
// and a node connecting with its certificate.
func TestCertsDocsCommands(t *testing.T) {
	docs := map[string]string{}
	for _, name := range []string{"security.md", "cli.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = string(b)
	}
	// The guide's walk-through is its own section; the rest of the guide
	// shows other serves (encryption at rest, SPIRE's files).
	sec := docs["security.md"]
	start := strings.Index(sec, "### Getting started: `pylon certs`")
	end := strings.Index(sec[start+1:], "\n### ")
	if start < 0 || end < 0 {
		t.Fatal("security.md has no section \"Getting started: `pylon certs`\" followed by another")
	}
	docs["security.md"] = sec[start : start+1+end]
	ran := 0
	for name, md := range docs {
		t.Chdir(t.TempDir())
		var addr string
		for _, line := range docCommands(md) {
			args := shellWords(t, line)
			if len(args) < 2 || args[0] != "pylon" || (args[1] != "certs" && name != "security.md") {
				continue
			}
			switch args[1] {
			case "certs":
				mustCerts(t, args[2:]...)
			case "serve":
				addr = serveXDS(t, args[2:]...)
			case "bootstrap":
				if code, _, stderr := run(args[1:]...); code != 0 {
					t.Fatalf("%s: %s: exit %d: %s", name, line, code, stderr)
				}
			default:
				continue
			}
			ran++
			t.Logf("%s: ok: %s", name, line)
		}
		if name != "security.md" {
			continue
		}
		if addr == "" {
			t.Fatal("security.md no longer starts pylon serve with the certificates pylon certs made")
		}
		pair, err := tls.LoadX509KeyPair("pki/app-1.pem", "pki/app-1-key.pem")
		if err != nil {
			t.Fatal(err)
		}
		caPEM, _ := os.ReadFile("pki/ca.pem")
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		node := xdstest.Node("app-1")
		node.Cluster = "payments"
		conn := xdstest.DialTLS(t, addr, &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}})
		if err := xdstest.StreamErr(conn, node); err != nil {
			t.Fatalf("app-1 with the certificate security.md issued: %v", err)
		}
	}
	if ran < 8 {
		t.Fatalf("ran %d commands from the docs; the pylon certs examples moved?", ran)
	}
}

// docCommands returns the lines of md's ```sh blocks (continuations
// joined) and its inline `pylon certs ...` spans.
func docCommands(md string) []string {
	var cmds []string
	in, cont := false, ""
	for line := range strings.Lines(md) {
		line = strings.TrimSpace(line)
		switch {
		case !in && line == "```sh":
			in = true
		case in && line == "```":
			in = false
		case in:
			if strings.HasSuffix(line, `\`) {
				cont += strings.TrimSuffix(line, `\`) + " "
				continue
			}
			cmds, cont = append(cmds, cont+line), ""
		default:
			for _, span := range strings.Split(line, "`")[1:] {
				if strings.HasPrefix(span, "pylon certs ") {
					cmds = append(cmds, span)
				}
			}
		}
	}
	return cmds
}

// shellWords splits a command as sh would, for the little the docs use:
// words, single quotes, and a comment after a space.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '#' && !inWord:
			return words
		case strings.IndexByte(`"$|&;<>`+"`\\", c) >= 0:
			if len(words) > 1 && words[0] == "pylon" && (words[1] == "certs" || words[1] == "serve") {
				t.Fatalf("%q: %q is not parsed here", line, c)
			}
			return nil
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// Flags of the other kind of certificate, and bad addresses, are refused
// rather than ignored.
func TestCertsFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	mustCerts(t, "init", "--dir", dir, "--trust-domain", "example.org")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "--ip", "nope"}, `--ip "nope": not an IP address`},
		{[]string{"--server", "--dns", "localhost", "--node-id", "edge-1"}, "--node-id is for a client certificate"},
		{[]string{"--node-id", "edge-1", "--cluster", "edge", "--ip", "127.0.0.1"}, "--ip is for a server certificate"},
		{[]string{"--cluster", "edge"}, "--node-id is required"},
		{[]string{"--node-id", "edge-1", "--cluster", "edge", "--peer"}, "--peer is for a server certificate"},
		{[]string{"--node-id", "edge-1", "--cluster", "edge", "--trust-domain", "other.org"}, "this CA is for trust domain example.org"},
	} {
		code, _, stderr := run(append([]string{"certs", "issue", "--dir", dir}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, stderr, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("refused issues left files: %v", entries)
	}
}

// --server --peer makes a certificate an etcd member serves and dials its
// peers with: server and client auth, for the names given.
func TestCertsIssuePeerCertificate(t *testing.T) {
	dir := t.TempDir()
	mustCerts(t, "init", "--dir", dir)
	mustCerts(t, "issue", "--server", "--peer", "--dir", dir, "--name", "etcd", "--dns", "etcd", "--dns", "etcd-0.etcd")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "etcd.pem"), filepath.Join(dir, "etcd-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) || c.VerifyHostname("etcd-0.etcd") != nil {
		t.Errorf("--server --peer: usages %v, names %v: want server and client auth for etcd-0.etcd", c.ExtKeyUsage, c.DNSNames)
	}
}
