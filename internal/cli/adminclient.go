package cli

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/certs"
)

// adminFlags are how the CLI reaches a running Pylon's admin API.
type adminFlags struct {
	addr string
	// tokenFile holds the write token; readTokenFile the read token, which
	// reads prefer (the least privilege that works).
	tokenFile, readTokenFile string
	// caFile, if set, verifies Pylon's admin certificate: the API is
	// reached over https.
	caFile string
}

func (a *adminFlags) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&a.addr, "admin-addr", "127.0.0.1:19000", "Pylon's admin address (serve listens there; status and get talk to it)")
	f.StringVar(&a.tokenFile, "token-file", "pylon-data/admin-token", "the admin API's write token")
	f.StringVar(&a.readTokenFile, "read-token-file", "pylon-data/read-token", "the admin API's read token (serve: default DATA_DIR/read-token, generated on first start)")
	f.StringVar(&a.caFile, "admin-ca-file", "", "reach the admin API over https, verifying its certificate with this PEM CA bundle")
}

// client is the admin API client for the flags as parsed.
func (a *adminFlags) client() adminClient { return adminClient{*a} }

// adminClient talks to a running Pylon's admin API.
type adminClient struct{ f adminFlags }

// maxTokenFile bounds a token file read: a token is 64 hex digits.
const maxTokenFile = 4 << 10

func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	return strings.TrimSpace(string(b)), err
}

// readToken is the read token, or the write token when there is no read
// token file; "" when neither can be read (the server says which it wants).
func (c adminClient) readToken() string {
	for _, p := range []string{c.f.readTokenFile, c.f.tokenFile} {
		if t, err := readTokenFile(p); err == nil && t != "" {
			return t
		}
	}
	return ""
}

func (c adminClient) http(timeout time.Duration) (*http.Client, string, error) {
	if c.f.caFile == "" {
		return &http.Client{Timeout: timeout}, "http://" + c.f.addr, nil
	}
	pool, err := certs.LoadPool(c.f.caFile)
	if err != nil {
		return nil, "", fmt.Errorf("--admin-ca-file: %w", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &http.Client{Timeout: timeout, Transport: tr}, "https://" + c.f.addr, nil
}

// get reads path with the read token and decodes its JSON into v.
func (c adminClient) get(path string, v any) error {
	client, base, err := c.http(10 * time.Second)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	if t := c.readToken(); t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Pylon's admin API at %s (is it running? --admin-addr): %w", c.f.addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}

// do sends an authorised write with the write token.
func (c adminClient) do(method, path string, body []byte) (map[string]any, error) {
	token, err := readTokenFile(c.f.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading the admin token (--token-file): %w", err)
	}
	client, base, err := c.http(30 * time.Second)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Pylon's admin API at %s: %w", c.f.addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode >= 300 {
		return out, fmt.Errorf("%s (%s)", refusal(out), resp.Status)
	}
	return out, nil
}

// refusal renders an admin API error body: its message, or its
// diagnostics one per line.
func refusal(out map[string]any) string {
	msg, _ := out["error"].(string)
	if diags, ok := out["diagnostics"].([]any); ok && len(diags) > 0 {
		msg = "refused:"
		for _, d := range diags {
			b, _ := json.Marshal(d)
			var dd struct {
				File, Type, Name, Field, Message string
				Line                             int
			}
			_ = json.Unmarshal(b, &dd)
			msg += fmt.Sprintf("\n  %s: %s %q: %s: %s", dd.File, dd.Type, dd.Name, dd.Field, dd.Message)
		}
	}
	return msg
}
