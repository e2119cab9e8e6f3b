// Package ui is Pylon's fleet dashboard: static HTML, CSS and JavaScript
// embedded in the binary and served under /ui/ on the admin listener.
//
// The assets carry no data, so they are served without a token; every
// datum the page shows comes from the admin API, which the page calls with
// the token the operator types in (kept in the tab's sessionStorage and
// sent as Authorization: Bearer, never as a cookie, so there is no CSRF to
// defend against). The headers forbid inline script and style, framing and
// referrers: text from proxies (node ids, NACK reasons) is rendered as
// text, and the policy makes sure nothing else could run if it were not.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var assets embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/ui/"

// Policy is the Content-Security-Policy of every asset: only this origin's
// own files, no inline script or style, no plugins, no framing, no forms
// posting elsewhere; the API is called on the same origin.
const Policy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the embedded assets under Prefix with strict headers.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "static")
	if err != nil {
		// The directory is embedded at build time: unreachable.
		panic(err)
	}
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", Policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		// Always revalidated: a new Pylon build may ship new assets under
		// the same names.
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard's files are read-only", http.StatusMethodNotAllowed)
			return
		}
		// Directory listings are not part of the product.
		if p := r.URL.Path; p != Prefix && strings.HasSuffix(p, "/") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}
