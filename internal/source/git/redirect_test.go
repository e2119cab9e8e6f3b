package git

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pylon-xds/pylon/internal/source/git/gittest"
)

// tlsHost serves h over HTTPS on 127.0.0.1 until the test ends.
func tlsHost(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// redirectTo answers every request with a redirect to the same path and
// query on base.
func redirectTo(base string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+r.URL.RequestURI(), http.StatusFound)
	})
}

// startTLS runs a source of o that trusts srv's certificate.
func startTLS(t *testing.T, srv *httptest.Server, o Options) (*Source, string) {
	t.Helper()
	s, _ := newSource(t, o)
	s.http.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	u := next(t, run(t, s))
	if u.Err == nil {
		return s, ""
	}
	return s, u.Err.Error()
}

// A host that redirects HTTPS to plain HTTP (the same address, another
// port) is refused, and the credentials never cross in clear.
func TestRedirectToHTTPIsRefused(t *testing.T) {
	const token = "s3cret-token-1234"
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	var mu sync.Mutex
	var got []string
	clear := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		repo.HTTPHandler(token).ServeHTTP(w, r)
	}))
	t.Cleanup(clear.Close)
	srv := tlsHost(t, redirectTo(clear.URL))
	_, err := startTLS(t, srv, Options{URL: srv.URL + "/repo.git", CredentialsFile: writePrivate(t, token)})
	if !strings.Contains(err, "redirect") || strings.Contains(err, token) {
		t.Fatalf("a redirect from https to http: %q, want it refused, without the token", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Errorf("the http host was asked %d times, with Authorization %q", len(got), got)
	}
}

// A host that redirects to another host is refused, naming it: the
// repository read is the one the operator named.
func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	other := tlsHost(t, repo.HTTPHandler(""))
	srv := tlsHost(t, redirectTo(other.URL))
	s, err := startTLS(t, srv, Options{URL: srv.URL + "/repo.git"})
	want := "redirected to " + other.URL + ", another scheme, host or port"
	if !strings.Contains(err, want) || !strings.Contains(err, s.Shown()) {
		t.Fatalf("a redirect to another host: %q, want it refused, saying %q", err, want)
	}
}

// A redirect within the host (a repository moved, or its name without
// .git) is followed.
func TestRedirectWithinTheHostIsFollowed(t *testing.T) {
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.yaml": "v1"})
	good := repo.HTTPHandler("")
	srv := tlsHost(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, "/old.git/"); ok {
			http.Redirect(w, r, "/repo.git/"+p+"?"+r.URL.RawQuery, http.StatusMovedPermanently)
			return
		}
		good.ServeHTTP(w, r)
	}))
	s, _ := newSource(t, Options{URL: srv.URL + "/old.git"})
	s.http.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	wantFiles(t, next(t, run(t, s)), rev, "pylon.yaml=v1;")
}

// Two URLs are one origin when their schemes, hosts and ports are the
// same, a scheme's default port written or not.
func TestOriginIsSchemeHostAndPort(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"https://git.example.com/a.git", "https://GIT.example.com:443/b.git", true},
		{"http://[::1]/a.git", "http://[::1]:80/a.git", true},
		{"https://git.example.com/a.git", "http://git.example.com/a.git", false},
		{"https://git.example.com/a.git", "https://git.example.com:8443/a.git", false},
		{"https://git.example.com/a.git", "https://evil.example.com/a.git", false},
		{"https://git.example.com/a.git", "https://git.example.com.evil.example/a.git", false},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := origin(a) == origin(b); got != c.same {
			t.Errorf("%s and %s: one origin %v, want %v (%s, %s)", c.a, c.b, got, c.same, origin(a), origin(b))
		}
	}
}
