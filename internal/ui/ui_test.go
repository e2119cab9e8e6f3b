package ui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// Every answer carries the policy and the other strict headers, errors
// too; the files are served with their types; nothing else is.
func TestHeaders(t *testing.T) {
	for _, c := range []struct {
		method, path string
		code         int
		ctype        string
	}{
		{"GET", "/ui/", http.StatusOK, "text/html; charset=utf-8"},
		{"GET", "/ui/app.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"GET", "/ui/app.css", http.StatusOK, "text/css; charset=utf-8"},
		{"HEAD", "/ui/app.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"GET", "/ui/nothing.js", http.StatusNotFound, ""},
		{"POST", "/ui/", http.StatusMethodNotAllowed, ""},
	} {
		rec := serve(t, c.method, c.path)
		h := rec.Header()
		if rec.Code != c.code || c.ctype != "" && h.Get("Content-Type") != c.ctype {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, rec.Code, h.Get("Content-Type"), c.code, c.ctype)
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": Policy, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
			"X-Frame-Options": "DENY", "Cache-Control": "no-cache", // the file server drops it from errors
		} {
			if got := h.Get(k); got != want && (k != "Cache-Control" || rec.Code == http.StatusOK) {
				t.Errorf("%s %s: %s %q, want %q", c.method, c.path, k, got, want)
			}
		}
	}
	for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
		if !strings.Contains(Policy, d) {
			t.Errorf("the policy lacks %s", d)
		}
	}
	if strings.Contains(Policy, "unsafe") {
		t.Error("the policy allows something unsafe")
	}
}

// The assets hold nothing the policy would have to allow (inline script,
// inline style, handlers in markup) and the script never parses text as
// HTML: text from proxies is only ever set as text.
func TestAssetsAreInert(t *testing.T) {
	html := read(t, "static/index.html")
	if m := regexp.MustCompile(`<script(?:\s[^>]*)?>`).FindAllString(html, -1); len(m) != 1 || !strings.Contains(m[0], `src="app.js"`) {
		t.Errorf("index.html scripts %v, want only app.js", m)
	}
	for _, bad := range []string{"<style", " style=", " onclick=", " onload=", "javascript:", "http://", "https://"} {
		if strings.Contains(html, bad) {
			t.Errorf("index.html holds %q", bad)
		}
	}
	// The SVG namespace is a name, not an address anything is loaded from.
	js := strings.ReplaceAll(read(t, "static/app.js"), "'http://www.w3.org/2000/svg'", "")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('style'", "localStorage", "document.cookie", "http://", "https://"} {
		if strings.Contains(js, bad) {
			t.Errorf("app.js uses %q", bad)
		}
	}
	if !strings.Contains(js, "sessionStorage") || !strings.Contains(js, "'Authorization': 'Bearer '") {
		t.Error("app.js should keep the token in sessionStorage and send it as a bearer token")
	}
	css := read(t, "static/app.css")
	if strings.Contains(css, "@import") || strings.Contains(css, "url(http") || strings.Contains(css, "@font-face") {
		t.Error("app.css loads something from elsewhere")
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(assets, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
