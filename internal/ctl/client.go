package ctl

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/loopback"
	"github.com/pylon-xds/pylon/internal/redact"
)

// Environment variables the CLI reads (once, into flag defaults and token
// lookups; never as feature switches).
const (
	envDataDir   = "PYLON_DATA_DIR"
	envAdminAddr = "PYLON_ADMIN_ADDR"
	envToken     = "PYLON_TOKEN"
	envReadToken = "PYLON_READ_TOKEN"
)

// Flags are how a command reaches a running Pylon's admin API: the
// persistent flags Register adds, as parsed. pylon's serve and relay read
// them too (where to listen, where the tokens are kept).
type Flags struct {
	Addr string
	// DataDir is Pylon's data folder: serve keeps its store and tokens
	// there; the other commands find the tokens there.
	DataDir string
	// TokenFile holds the write token; ReadTokenFile the read token, which
	// reads prefer (the least privilege that works). "" means: from the
	// environment, else from DataDir.
	TokenFile, ReadTokenFile string
	// CAFile, if set, verifies Pylon's admin certificate: the API is
	// reached over https.
	CAFile string
	// CertFile and KeyFile are the CLI's client certificate, for an
	// admin port started with --admin-client-ca.
	CertFile, KeyFile string
	// Insecure lets tokens go over plaintext HTTP to an admin address
	// beyond loopback (as serve --admin-insecure serves it).
	Insecure bool
	// getenv is the environment Register was given (nil: an empty one).
	getenv func(string) string
}

// Register adds the admin flags to root's persistent flags, their
// defaults from getenv.
func (a *Flags) Register(root *cobra.Command, getenv func(string) string) {
	a.getenv = getenv
	dataDir := getenv(envDataDir)
	if dataDir == "" {
		dataDir = "pylon-data"
	}
	addr := getenv(envAdminAddr)
	if addr == "" {
		addr = "127.0.0.1:19000"
	}
	f := root.PersistentFlags()
	f.StringVar(&a.Addr, "admin-addr", addr, "Pylon's admin address, HOST:PORT (or http://HOST:PORT, https://HOST:PORT): serve listens there, the other commands talk to it; $"+envAdminAddr+" sets the default")
	f.StringVar(&a.DataDir, "data-dir", dataDir, "Pylon's data folder: serve keeps the embedded store and the admin tokens there, the other commands read the tokens from it; $"+envDataDir+" sets the default")
	f.StringVar(&a.TokenFile, "token-file", "", "the file of the admin API's write token the other commands send (default $"+envToken+", the token itself, else DATA_DIR/admin-token); serve keeps it in --admin-token-file")
	f.StringVar(&a.ReadTokenFile, "read-token-file", "", "the file of the admin API's read token: serve keeps it there (generated on first start; default DATA_DIR/read-token), the other commands read it from there (default $"+envReadToken+", the token itself, else DATA_DIR/read-token, else the write token)")
	f.StringVar(&a.CAFile, "admin-ca-file", "", "reach the admin API over https, verifying its certificate with this PEM CA bundle")
	f.StringVar(&a.CertFile, "admin-cert-file", "", "with --admin-ca-file: present this PEM client certificate (for an admin port started with --admin-client-ca)")
	f.StringVar(&a.KeyFile, "admin-key-file", "", "the client certificate's PEM private key")
	f.BoolVar(&a.Insecure, "admin-insecure", false, "with serve: allow the admin API beyond loopback without TLS; other commands: send tokens over plaintext HTTP to such an address (anyone on the path can read them)")
}

// Client is the admin API client for the flags as parsed.
func (a *Flags) Client() Client { return Client{*a} }

// env reads the environment Register was given.
func (a *Flags) env(name string) string {
	if a.getenv == nil {
		return ""
	}
	return a.getenv(name)
}

// dataPath is a file in the data folder, made absolute so that an error
// says exactly where the CLI looked.
func (a *Flags) dataPath(name string) string {
	p := filepath.Join(a.DataDir, name)
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// Client talks to a running Pylon's admin API.
type Client struct{ f Flags }

// maxTokenFile bounds a token file read: a token is 64 hex digits.
const maxTokenFile = 4 << 10

func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err == nil && len(bytes.TrimSpace(b)) == 0 {
		err = fmt.Errorf("%s is empty", path)
	}
	return strings.TrimSpace(string(b)), err
}

// tokenSource is one place a token may come from, named for errors.
type tokenSource struct {
	where string
	get   func() (string, error)
}

func (c Client) fileSource(path string) tokenSource {
	return tokenSource{where: path, get: func() (string, error) { return readToken(path) }}
}

func (c Client) envSource(name string) tokenSource {
	return tokenSource{where: "$" + name, get: func() (string, error) {
		if t := strings.TrimSpace(c.f.env(name)); t != "" {
			return t, nil
		}
		return "", errors.New("not set")
	}}
}

// writeSources are where the write token is looked for, in order: a flag
// given is the only place looked at.
func (c Client) writeSources() []tokenSource {
	if c.f.TokenFile != "" {
		return []tokenSource{c.fileSource(c.f.TokenFile)}
	}
	return []tokenSource{c.envSource(envToken), c.fileSource(c.f.dataPath("admin-token"))}
}

// readSources: the read token, else the write token; but never the write
// token for a read over plaintext beyond loopback (--admin-insecure): a
// read should not expose the most privileged token.
func (c Client) readSources() []tokenSource {
	var s []tokenSource
	if c.f.ReadTokenFile != "" {
		s = append(s, c.fileSource(c.f.ReadTokenFile))
	} else {
		s = append(s, c.envSource(envReadToken), c.fileSource(c.f.dataPath("read-token")))
	}
	if overTLS, hostPort, err := c.f.overTLS(); err == nil && !overTLS && !loopback.Is(hostPort) {
		return s
	}
	return append(s, c.writeSources()...)
}

// token is the first token found and where it was found, or an error
// naming every place looked.
func token(sources []tokenSource) (tok, where string, err error) {
	var tried []string
	for _, s := range sources {
		t, err := s.get()
		if err == nil {
			return t, s.where, nil
		}
		tried = append(tried, s.where)
	}
	return "", "", fmt.Errorf("none in %s (run where serve's data folder is, or give --data-dir, $%s, $%s or --token-file)",
		strings.Join(tried, ", "), envDataDir, envToken)
}

// unauthorised is a 401 to a read or a write (what) as the CLI tells it:
// that the token sent from where was refused, or (where "") that none was
// sent, and why, then what the server said.
func unauthorised(err error, what, where string, why error) error {
	if where == "" {
		return fmt.Errorf("no token was sent: no token for a %s: %v\n  the server said: %w", what, why, err)
	}
	return fmt.Errorf("the token was refused: the token from %s is not one this Pylon accepts for a %s "+
		"(is it this Pylon's current token? serve keeps its tokens in its data folder: --data-dir)\n  the server said: %w", where, what, err)
}

// Target reads --admin-addr: HOST:PORT, or http://HOST:PORT or
// https://HOST:PORT (a trailing slash allowed). scheme is "" for a bare
// HOST:PORT. The value is echoed in an error only without its user
// information, which could be a password.
func Target(addr string) (scheme, hostPort string, err error) {
	bad := func(shown string) error {
		return fmt.Errorf("--admin-addr %q: the flag takes HOST:PORT (127.0.0.1:19000), or http://HOST:PORT or https://HOST:PORT", shown)
	}
	if !strings.Contains(addr, "://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", bad(addr)
		}
		return "", addr, nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", "", bad("(not a URL)")
	}
	shown := addr
	if u.User != nil {
		u.User = nil
		shown = u.Redacted()
	}
	scheme = strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || shown != addr || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(addr, "#") || strings.HasSuffix(addr, "?") {
		return "", "", bad(shown)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return "", "", bad(shown)
	}
	return scheme, u.Host, nil
}

// overTLS says whether the CLI reaches the API over https, and at which
// HOST:PORT: https:// or --admin-ca-file asks for it.
func (a *Flags) overTLS() (bool, string, error) {
	scheme, hostPort, err := Target(a.Addr)
	if err != nil {
		return false, "", err
	}
	if scheme == "http" && a.CAFile != "" {
		return false, "", fmt.Errorf("--admin-addr %s is plaintext but --admin-ca-file asks for https: write https:// or leave the scheme out", a.Addr)
	}
	return scheme == "https" || a.CAFile != "", hostPort, nil
}

func (c Client) http(timeout time.Duration) (*http.Client, string, error) {
	overTLS, hostPort, err := c.f.overTLS()
	if err != nil {
		return nil, "", err
	}
	if !overTLS {
		if c.f.CertFile != "" || c.f.KeyFile != "" {
			return nil, "", fmt.Errorf("--admin-cert-file needs --admin-ca-file (https)")
		}
		// A token over plaintext to another host can be read on the way
		// and replayed: only on loopback, unless the operator says so.
		if !loopback.Is(hostPort) && !c.f.Insecure {
			return nil, "", fmt.Errorf("--admin-addr %s is not loopback: reach it over https (https://HOST:PORT, with --admin-ca-file unless the system's roots verify its certificate), or pass --admin-insecure to send tokens in clear", c.f.Addr)
		}
		return &http.Client{Timeout: timeout}, "http://" + hostPort, nil
	}
	// Without --admin-ca-file, https:// verifies with the system's roots.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.f.CAFile != "" {
		pool, err := certs.LoadPool(c.f.CAFile)
		if err != nil {
			return nil, "", fmt.Errorf("--admin-ca-file: %w", err)
		}
		cfg.RootCAs = pool
	}
	if c.f.CertFile != "" || c.f.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.f.CertFile, c.f.KeyFile)
		if err != nil {
			// The error names the files; tls never quotes key bytes.
			return nil, "", fmt.Errorf("--admin-cert-file, --admin-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	return &http.Client{Timeout: timeout, Transport: tr}, "https://" + hostPort, nil
}

// maxResponse bounds what the CLI reads of an answer.
const maxResponse = 64 << 20

// send does one request and returns the answer's body; an answer that is
// not a success becomes an error carrying the server's message and
// diagnostics verbatim.
func (c Client) send(method, path string, body []byte, header http.Header, tok string, timeout time.Duration) ([]byte, error) {
	client, base, err := c.http(timeout)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Pylon's admin API at %s (is it running? --admin-addr): %w", c.f.Addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return raw, &APIError{Status: resp.Status, Code: resp.StatusCode, Body: raw}
	}
	return raw, nil
}

// GetRaw reads path with the read token; accept, if set, asks for a
// format.
func (c Client) GetRaw(path, accept string) ([]byte, error) {
	tok, where, terr := token(c.readSources())
	h := http.Header{}
	if accept != "" {
		h.Set("Accept", accept)
	}
	b, err := c.send(http.MethodGet, path, nil, h, tok, 10*time.Second)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == http.StatusUnauthorized {
		return nil, unauthorised(err, "read", where, terr)
	}
	return b, err
}

// Get reads path with the read token and decodes its JSON into v.
func (c Client) Get(path string, v any) error {
	b, err := c.GetRaw(path, "")
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Do sends an authorised write with the write token; contentType is the
// body's type ("" for none).
func (c Client) Do(method, path string, body []byte, contentType string) (map[string]any, error) {
	var out map[string]any
	if err := c.write(method, path, body, contentType, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Post sends a bodiless POST with the write token and decodes the
// answer into v.
func (c Client) Post(path string, v any) error {
	return c.write(http.MethodPost, path, nil, "", v)
}

// write is Do, the answer decoded into v.
func (c Client) write(method, path string, body []byte, contentType string, v any) error {
	tok, where, err := token(c.writeSources())
	if err != nil {
		// Not sent without one: every write needs it.
		return fmt.Errorf("no token was sent: the write token: %w", err)
	}
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	raw, err := c.send(method, path, body, h, tok, 30*time.Second)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == http.StatusUnauthorized {
		return unauthorised(err, "write", where, nil)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: the answer is not JSON: %w", path, err)
	}
	return nil
}

// APIError is an answer that is not a success: the server's error and
// diagnostics, shown as the server wrote them (already redacted there).
type APIError struct {
	Status string
	Code   int
	Body   []byte
}

func (e *APIError) Error() string {
	var body struct {
		Error       string            `json:"error"`
		Diagnostics []diag.Diagnostic `json:"diagnostics"`
		// Total counts them when the server sent only the first.
		Total int `json:"diagnosticsTotal"`
	}
	if json.Unmarshal(e.Body, &body) != nil {
		// Not the API's JSON (a proxy in between?): its text, bounded
		// and scrubbed of any key it might quote.
		s := redact.String(strings.TrimSpace(string(e.Body)))
		if len(s) > 512 {
			s = s[:512] + "..."
		}
		return fmt.Sprintf("%s: %s", e.Status, s)
	}
	if len(body.Diagnostics) == 0 {
		return fmt.Sprintf("%s (%s)", body.Error, e.Status)
	}
	var b strings.Builder
	total := max(body.Total, len(body.Diagnostics))
	fmt.Fprintf(&b, "refused (%s), %d problem(s):", e.Status, total)
	for _, d := range body.Diagnostics {
		b.WriteString("\n  " + d.String())
	}
	if more := total - len(body.Diagnostics); more > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more (the server sends the first %d)", more, len(body.Diagnostics))
	}
	return b.String()
}
