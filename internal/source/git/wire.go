package git

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/file"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// wire is one poll's connection to the host, and the bounds on what the
// host may send it: a hostile or broken host could advertise refs without
// end, send a pack without end, or a pack of countless objects, and each
// would be held in memory until the poll's timeout. A read over a bound
// fails the poll with over, an error saying which bound and naming the
// repository, whatever go-git makes of the failed read.
type wire struct {
	s    *Source
	over atomic.Pointer[error]
}

// trip records err as the bound that ended the poll (the first one only)
// and returns it.
func (w *wire) trip(err error) error {
	w.over.CompareAndSwap(nil, &err)
	return *w.over.Load()
}

// tripped is the bound a read went over, or nil.
func (w *wire) tripped() error {
	if p := w.over.Load(); p != nil {
		return *p
	}
	return nil
}

// refsOver is the error of an advertisement over MaxRefBytes.
func (w *wire) refsOver() error {
	return fmt.Errorf("git %s: the host's ref advertisement is over the limit of %d KiB (too many refs, or refs too long)", w.s.shown, w.s.o.MaxRefBytes>>10)
}

// packOver is the error of a pack over what MaxBytes of objects can take.
func (w *wire) packOver() error {
	return fmt.Errorf("git %s: the host sent more than %d KiB for one commit, over the limit", w.s.shown, packWireLimit(w.s.o.MaxBytes)>>10)
}

// packWireLimit is how much a host may send for a fetch of max bytes of
// objects: a pack is compressed, but incompressible files and the
// protocol's framing add a little.
func packWireLimit(max int64) int64 { return max + max/16 + 64<<10 }

// capped reads at most left bytes of r; reading past them fails with
// err, tripped on w. Its bound can be moved from one phase of a stream to
// the next (over SSH the advertisement and the pack are one stream).
type capped struct {
	r    io.Reader
	w    *wire
	left int64
	err  func() error
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.w.trip(c.err())
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// set bounds what is read from here on.
func (c *capped) set(left int64, err func() error) { c.left, c.err = left, err }

// cappedBody is an HTTP response's body read through capped.
type cappedBody struct {
	*capped
	io.Closer
}

// cappedHTTP bounds every response body the host sends: the ref
// advertisement (GET .../info/refs) by MaxRefBytes, the pack (and any
// other answer) by the pack's wire limit. An error's body is bounded the
// same way, and shown only in part (see scrub).
type cappedHTTP struct {
	base http.RoundTripper
	w    *wire
}

func (t cappedHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	c := &capped{r: res.Body, w: t.w}
	if strings.HasSuffix(req.URL.Path, "/info/refs") {
		c.set(t.w.s.o.MaxRefBytes, t.w.refsOver)
	} else {
		c.set(packWireLimit(t.w.s.o.MaxBytes), t.w.packOver)
	}
	res.Body = cappedBody{c, res.Body}
	return res, nil
}

// sameOrigin refuses a redirect to another scheme, host or port: the
// repository read, and the one the credentials go to, is the one the
// operator named. (go-git refuses https to http itself, and drops the
// credentials on a hop to another host, but would read that host's
// config.) A redirect within the host, a repository moved or named
// without .git, is followed.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if origin(req.URL) != origin(via[0].URL) {
		return fmt.Errorf("the host redirected to %s, another scheme, host or port: refused (if the repository moved, use its new URL)", origin(req.URL))
	}
	return nil
}

// origin is u's scheme, host and port (the scheme's default if u names
// none), as scheme://host:port.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// session opens an upload-pack session with the host, over a transport
// of this poll's own: go-git's default ones are shared by the process and
// unbounded.
func (w *wire) session(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	switch ep.Protocol {
	case "http", "https":
		client := githttp.NewClient(&http.Client{Transport: cappedHTTP{base: w.s.http, w: w}, CheckRedirect: sameOrigin})
		return client.NewUploadPackSession(ep, auth)
	case "ssh":
		a, ok := auth.(pinnedSSH)
		if !ok {
			return nil, errors.New("over ssh:// the credentials are a private key")
		}
		return &sshSession{w: w, ep: ep, auth: a}, nil
	case "file":
		// The operator's own disk, read by Git's own upload-pack: what
		// it sends is bounded by the objects' bounds alone.
		return file.DefaultClient.NewUploadPackSession(ep, auth)
	}
	return nil, fmt.Errorf("unsupported scheme %q", ep.Protocol)
}
