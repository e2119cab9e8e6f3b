package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
)

// bound is how long any one wait may take.
const bound = 20 * time.Second

// pylon is a Pylon running in process.
type pylon struct {
	xdsAddr, adminAddr string
	readToken, token   string
}

// startPylon runs the daemon (daemontest.Start: loopback, a fresh data
// folder unless o names one) with the suites' short debounce and its log
// in a daemontest.LogBuffer, printed when the test fails.
func startPylon(t testing.TB, o daemon.Options) *pylon {
	t.Helper()
	o.DebounceQuiet, o.DebounceMax = daemontest.Quiet, daemontest.MaxWait
	if o.Identifier == "" {
		o.Identifier = "pylon-ui"
	}
	o.Version = "v0.9.0-test"
	logs := &daemontest.LogBuffer{Keep: 256 << 10}
	o.Logger = logs.Logger()
	d := daemontest.Start(t, o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", o.Identifier, logs.String())
		}
	})
	return &pylon{xdsAddr: d.XDS, adminAddr: d.Admin, readToken: d.Token(t, "read-token"), token: d.Token(t, "admin-token")}
}

// call sends one admin request and returns the status and body.
func (p *pylon) call(t testing.TB, token, method, path string, body []byte) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.adminAddr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// apply writes a config document with the write token and returns the
// fleet version it produced, once it is being served.
func (p *pylon) apply(t testing.TB, doc string) (revision int64, version string) {
	t.Helper()
	code, body := p.call(t, p.token, "POST", "/v1/apply", []byte(doc))
	if code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	var res struct {
		Revision int64  `json:"revision"`
		Version  string `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	p.waitServing(t, res.Version)
	return res.Revision, res.Version
}

// waitServing waits until /status says version is served.
func (p *pylon) waitServing(t testing.TB, version string) {
	t.Helper()
	eventually(t, "version "+version+" served", func() bool {
		_, s := p.call(t, p.readToken, "GET", "/status", nil)
		var st struct {
			Config struct{ Version string } `json:"config"`
		}
		return json.Unmarshal([]byte(s), &st) == nil && st.Config.Version == version
	})
}

// eventually polls cond until it holds, within bound.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// chromium finds the browser: skip without it, fail on CI.
func chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (/usr/bin/chromium): .ci/run installs Debian's chromium")
	}
	t.Skip("chromium is not installed (/usr/bin/chromium): apt-get install chromium to run the browser tests")
	return ""
}

// browser starts a headless Chromium and returns a tab's context; both
// end with the test.
func browser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", "new"),
		// Chromium's sandbox needs user namespaces a container running as
		// root usually lacks.
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1360, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// Start the browser now, so that a broken install fails here. The
	// first run's context is the browser's life, so it is bounded by a
	// watchdog rather than a timeout.
	watchdog := time.AfterFunc(bound, cancelTab)
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`true`))
	if !watchdog.Stop() || err != nil {
		t.Fatalf("chromium did not start within %v: %v", bound, err)
	}
	return ctx
}

// run runs actions in the tab within bound.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that reads a value, within bound.
func get[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval runs a script for its effect.
func eval(expr string) chromedp.Action[chromedp.Void] { return chromedp.Evaluate[chromedp.Void](expr) }

// waitJS waits until the JavaScript expression is true, within bound.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(bound)))
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s (%s): %v\npage text:\n%.3000s", what, expr, err, body)
	}
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// signIn opens the dashboard and signs in with token.
func (p *pylon) signIn(t testing.TB, ctx context.Context, token string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate("http://"+p.adminAddr+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
	)
	waitJS(t, ctx, "the overview", `!!document.querySelector('#groups, #stream-count')`)
}

// goTo shows a page of the dashboard (a hash route) without reloading.
func goTo(t testing.TB, ctx context.Context, hash string) {
	t.Helper()
	run(t, ctx, "go to "+hash, eval(`location.hash = `+jsString(hash)))
}

// screenshot writes the page to docs/dashboard/name.png with -update.
func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if !*update {
		return
	}
	png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	dir := filepath.Join("..", "..", "docs", "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// marker is in the planted private key; no page may show it, in clear or
// in base64 at any alignment.
const marker = "UIKEYMARKERq7Zx"

func markedKey() string {
	return "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B" + marker + "\nAAAA\n-----END PRIVATE KEY-----\n"
}

func markerForms() []string {
	forms := []string{marker}
	for pad := range 3 {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("A", pad) + marker))
		start := 0
		if pad > 0 {
			start = 4
		}
		forms = append(forms, enc[start:len(enc)-4])
	}
	return forms
}

// noKeyOnPage fails if the page's DOM or its text shows the key.
func noKeyOnPage(t testing.TB, ctx context.Context, page string) {
	t.Helper()
	html := get(t, ctx, "read "+page, chromedp.OuterHTML(chromedp.CSS("html")))
	text := get(t, ctx, "read "+page, chromedp.Evaluate[string](`document.body.innerText`))
	for _, f := range markerForms() {
		if strings.Contains(html, f) || strings.Contains(text, f) {
			t.Errorf("%s shows the private key (%q)", page, f)
		}
	}
	if strings.Contains(html, "BEGIN PRIVATE KEY") {
		t.Errorf("%s shows a PEM private key block", page)
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return string(b)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
